package failure

import (
	"errors"
	"fmt"
	"testing"
)

type panicked struct{}

func (panicked) Error() string      { return "task panicked: boom" }
func (panicked) StackTrace() string { return "goroutine 1 [running]:\nmain.f()" }

func TestEncodeDecodeKeepsClassification(t *testing.T) {
	for _, err := range []error{
		errors.New("plain"),
		NonRecoverable(errors.New("bad input")),
		EnvironmentError(errors.New("disk full")),
		&PartitionNotFoundError{ResultPartitionID: "r[1]@a", Detail: "gone"},
		fmt.Errorf("wrapped: %w", panicked{}),
	} {
		fi := Encode(err)
		back := Decode(fi)
		if Classify(back) != Classify(err) {
			t.Errorf("%v: classified %s after the round trip, %s before", err, Classify(back), Classify(err))
		}
		var re *RemoteError
		if !errors.As(back, &re) || back.Error() != err.Error() {
			t.Errorf("%v: decoded to %v", err, back)
		}
		// Relayed over more hops (runner, TaskManager, JobMaster) it
		// still reads the same: no repeated prefixes.
		if again := Decode(Encode(Decode(Encode(back)))); again.Error() != err.Error() || Classify(again) != Classify(err) {
			t.Errorf("%v: after three hops %v (%s)", err, again, Classify(again))
		}
	}
	if fi := Encode(fmt.Errorf("wrapped: %w", panicked{})); fi.Stack == "" {
		t.Error("the stack was lost")
	}
	var pnf *PartitionNotFoundError
	if !errors.As(Decode(Encode(&PartitionNotFoundError{ResultPartitionID: "r[1]@a"})), &pnf) || pnf.ResultPartitionID != "r[1]@a" {
		t.Error("the missing partition was lost")
	}
	if Encode(nil) != nil || Decode(nil) != nil {
		t.Error("nil must stay nil")
	}
}
