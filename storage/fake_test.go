package storage

import (
	"os"

	"github.com/colinmarc/hdfs/v2"
)

// fakeCloser fails like colinmarc/hdfs's FileWriter.Close while the last
// block replicates.
type fakeCloser struct {
	replicating int
	other       error
	calls       int
}

func (f *fakeCloser) Close() error {
	f.calls++
	if f.other != nil {
		return f.other
	}
	if f.calls <= f.replicating {
		return &os.PathError{Op: "create", Path: "/x", Err: hdfs.ErrReplicating}
	}
	return nil
}
