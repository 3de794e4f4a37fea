package stream

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/gofl/gofl/storage"
)

// fileOpenTimeout bounds connecting to the file system of a source or
// sink; every later call is bounded by storage's own timeouts.
const fileOpenTimeout = time.Minute

// checkFileURI fails, when the job is built, for a path that names a file
// system gofl has no client for.
func checkFileURI(p string) error {
	if !strings.Contains(p, "://") {
		return nil
	}
	u, err := url.Parse(p)
	if err != nil {
		return fmt.Errorf("%q is not a path or URI: %w", p, err)
	}
	switch u.Scheme {
	case "file", "hdfs":
		return nil
	}
	return fmt.Errorf("file system scheme %q of %q is not supported (want a path, file:// or hdfs://)", u.Scheme, p)
}

// openFileSystem opens the file system a source's or sink's path names: a
// plain path (made absolute in this process), file:// or hdfs://. The HDFS
// client takes its settings from the environment: the fs.hdfs.* and
// security.kerberos.* options a runner's TaskManager passes on as GOFL_*
// variables (storage.OptionsFromEnv), then $HADOOP_CONF_DIR,
// $HADOOP_USER_NAME and the like.
func openFileSystem(p string) (storage.FileSystem, string, error) {
	opts, err := storage.OptionsFromEnv()
	if err != nil {
		return nil, "", err
	}
	if !strings.Contains(p, "://") {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, "", err
		}
		p = "file://" + abs
	}
	ctx, cancel := context.WithTimeout(context.Background(), fileOpenTimeout)
	defer cancel()
	return storage.Open(ctx, p, opts)
}
