package jobmaster

import (
	"errors"
	"testing"

	"github.com/gofl/gofl/failure"
	"github.com/gofl/gofl/jobmanager/scheduler"
)

// A failed job reports its producer's crash, not the lost connection of the
// consumer that failed the job a moment earlier; a failure that restarted
// the job earlier is not the cause of its end (issue 13, bug 3).
func TestRootCausePrefersTheProducersFailure(t *testing.T) {
	earlier := errors.New("earlier failure, restarted")
	lost := errors.New("lost connection to producer: connection reset by peer")
	crash := errors.New("runner exited: panic: boom")
	rec := func(err error, typ failure.FailureType, restarted int) scheduler.FailureRecord {
		return scheduler.FailureRecord{Cause: err, Type: typ, Restarted: restarted}
	}
	cases := []struct {
		name string
		h    []scheduler.FailureRecord
		want error
	}{
		{"consumer first", []scheduler.FailureRecord{rec(earlier, failure.FailureEnvironment, 2),
			rec(lost, failure.FailurePartitionDataMissing, 0), rec(crash, failure.FailureEnvironment, 0)}, crash},
		{"producer first", []scheduler.FailureRecord{rec(crash, failure.FailureEnvironment, 0),
			rec(lost, failure.FailurePartitionDataMissing, 0)}, crash},
		{"only missing data", []scheduler.FailureRecord{rec(earlier, failure.FailureEnvironment, 1),
			rec(lost, failure.FailurePartitionDataMissing, 0)}, lost},
		{"one failure", []scheduler.FailureRecord{rec(crash, failure.FailureRecoverable, 0)}, crash},
	}
	for _, c := range cases {
		if got := rootCause(c.h); got != c.want {
			t.Errorf("%s: rootCause = %v, want %v", c.name, got, c.want)
		}
	}
}
