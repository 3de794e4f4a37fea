package failure

import (
	"errors"
	"fmt"
	"testing"
)

func TestClassify(t *testing.T) {
	base := errors.New("boom")
	pnf := &PartitionNotFoundError{ResultPartitionID: "rp-7", Detail: "asked tm-3"}

	tests := []struct {
		name string
		err  error
		want FailureType
	}{
		{"nil is recoverable", nil, FailureRecoverable},
		{"plain error is recoverable", base, FailureRecoverable},
		{"non-recoverable", NonRecoverable(base), FailureNonRecoverable},
		{"non-recoverable wrapped twice", fmt.Errorf("task t1: %w", fmt.Errorf("invoke: %w", NonRecoverable(base))), FailureNonRecoverable},
		{"sentinel ErrNonRecoverable wrapped", fmt.Errorf("suppress restarts: %w", ErrNonRecoverable), FailureNonRecoverable},
		{"environment", EnvironmentError(base), FailureEnvironment},
		{"environment wrapped", fmt.Errorf("slot s1: %w", EnvironmentError(base)), FailureEnvironment},
		{"sentinel ErrEnvironment wrapped", fmt.Errorf("heartbeat of tm-1 timed out: %w", ErrEnvironment), FailureEnvironment},
		{"partition not found", pnf, FailurePartitionDataMissing},
		{"partition not found wrapped", fmt.Errorf("reading input gate: %w", pnf), FailurePartitionDataMissing},
		{"sentinel ErrPartitionNotFound wrapped", fmt.Errorf("x: %w", ErrPartitionNotFound), FailurePartitionDataMissing},
		{"non-recoverable beats environment (outside)", NonRecoverable(EnvironmentError(base)), FailureNonRecoverable},
		{"non-recoverable beats environment (inside)", EnvironmentError(NonRecoverable(base)), FailureNonRecoverable},
		{"non-recoverable beats partition", fmt.Errorf("%w", &PartitionNotFoundError{ResultPartitionID: "p", Cause: NonRecoverable(base)}), FailureNonRecoverable},
		{"partition beats environment", EnvironmentError(pnf), FailurePartitionDataMissing},
		{"joined: non-recoverable wins", errors.Join(EnvironmentError(base), pnf, NonRecoverable(base)), FailureNonRecoverable},
		{"joined: partition beats environment", errors.Join(EnvironmentError(base), fmt.Errorf("w: %w", pnf)), FailurePartitionDataMissing},
		{"joined: environment beats plain", errors.Join(base, EnvironmentError(base)), FailureEnvironment},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.err); got != tt.want {
				t.Errorf("Classify(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestMarkersKeepTheCause(t *testing.T) {
	base := errors.New("boom")

	for _, err := range []error{NonRecoverable(base), EnvironmentError(base)} {
		if !errors.Is(err, base) {
			t.Errorf("errors.Is(%v, base) = false, want true", err)
		}
		if errors.Unwrap(err) != base {
			t.Errorf("errors.Unwrap(%v) = %v, want base", err, errors.Unwrap(err))
		}
	}
	if got, want := NonRecoverable(base).Error(), "non-recoverable: boom"; got != want {
		t.Errorf("NonRecoverable message = %q, want %q", got, want)
	}
	if got, want := EnvironmentError(base).Error(), "environment failure: boom"; got != want {
		t.Errorf("EnvironmentError message = %q, want %q", got, want)
	}
	if NonRecoverable(nil) != nil || EnvironmentError(nil) != nil {
		t.Error("marking a nil error must give nil")
	}
	if errors.Is(NonRecoverable(base), ErrEnvironment) || errors.Is(EnvironmentError(base), ErrNonRecoverable) {
		t.Error("a marker must match only its own sentinel")
	}
}

func TestPartitionNotFoundThroughWrapping(t *testing.T) {
	cause := errors.New("connection refused")
	err := fmt.Errorf("task map-3 (attempt 2): %w",
		EnvironmentError(&PartitionNotFoundError{ResultPartitionID: "rp-42", Detail: "producer tm-9", Cause: cause}))

	var pnf *PartitionNotFoundError
	if !errors.As(err, &pnf) {
		t.Fatalf("errors.As found no *PartitionNotFoundError in %v", err)
	}
	if pnf.ResultPartitionID != "rp-42" || pnf.Detail != "producer tm-9" {
		t.Errorf("got %+v, want ResultPartitionID rp-42 and Detail producer tm-9", pnf)
	}
	if !errors.Is(err, ErrPartitionNotFound) || !errors.Is(err, cause) {
		t.Errorf("errors.Is should match ErrPartitionNotFound and the cause in %v", err)
	}
	want := "task map-3 (attempt 2): environment failure: result partition rp-42 not found: producer tm-9: connection refused"
	if err.Error() != want {
		t.Errorf("message = %q, want %q", err.Error(), want)
	}
	if got := (&PartitionNotFoundError{ResultPartitionID: "rp-1"}).Error(); got != "result partition rp-1 not found" {
		t.Errorf("bare message = %q", got)
	}
}

func TestFailureTypeString(t *testing.T) {
	tests := []struct {
		t           FailureType
		name        string
		restartable bool
	}{
		{FailureNonRecoverable, "non-recoverable", false},
		{FailurePartitionDataMissing, "partition-data-missing", true},
		{FailureEnvironment, "environment", true},
		{FailureRecoverable, "recoverable", true},
		{FailureType(0), "FailureType(0)", true},
		{FailureType(99), "FailureType(99)", true},
	}
	for _, tt := range tests {
		if got := tt.t.String(); got != tt.name {
			t.Errorf("FailureType(%d).String() = %q, want %q", int(tt.t), got, tt.name)
		}
		if got := tt.t.Restartable(); got != tt.restartable {
			t.Errorf("%v.Restartable() = %v, want %v", tt.t, got, tt.restartable)
		}
	}
}

// Marking an error twice keeps one prefix, so a failure passed through
// several layers reads "environment failure: ..." once (issue 13, bug 3).
func TestMarksAreNotRepeated(t *testing.T) {
	base := errors.New("runner exited")
	e := EnvironmentError(EnvironmentError(base))
	if got := e.Error(); got != "environment failure: runner exited" {
		t.Errorf("EnvironmentError twice: %q", got)
	}
	if !errors.Is(e, base) || Classify(e) != FailureEnvironment {
		t.Errorf("EnvironmentError twice lost its meaning: %v", e)
	}
	n := NonRecoverable(NonRecoverable(base))
	if got := n.Error(); got != "non-recoverable: runner exited" {
		t.Errorf("NonRecoverable twice: %q", got)
	}
	if got := NonRecoverable(EnvironmentError(base)); Classify(got) != FailureNonRecoverable {
		t.Errorf("a stronger mark over an environment failure: %v", Classify(got))
	}
}
