// Package failure is the failure vocabulary shared by TaskManagers, job
// runners, the SDK and the JobMaster: the marks that classify an error
// (non-recoverable, partition data missing, environment, recoverable, as
// Flink's ThrowableType) and their wire form between processes. The
// JobMaster's restart decisions (package jobmanager/failover) build on it;
// code that only marks or reports failures imports this package alone.
package failure

import (
	"errors"
	"fmt"
)

// FailureType is the class of a failure, which decides how the scheduler
// reacts to it. It mirrors Flink's ThrowableType. The constants are ordered
// by precedence: when an error chain carries several marks, [Classify]
// returns the one with the smallest value.
type FailureType int

const (
	// FailureNonRecoverable failures must not be restarted at all, whatever
	// the restart strategy says (Flink's NonRecoverableError, e.g. a
	// SuppressRestartsException). The job fails.
	FailureNonRecoverable FailureType = iota + 1
	// FailurePartitionDataMissing failures mean a consumer could not read a
	// result partition (Flink's PartitionDataMissingError). The producer of
	// that partition must be re-run as well as the consumer.
	FailurePartitionDataMissing
	// FailureEnvironment failures come from the environment rather than the
	// task's own logic: a lost TaskManager or slot, a heartbeat timeout,
	// resource exhaustion (Flink's EnvironmentError). They are restartable.
	FailureEnvironment
	// FailureRecoverable is every other failure (Flink's RecoverableError);
	// it is restartable under the restart strategy.
	FailureRecoverable
)

// String returns a readable name, e.g. "non-recoverable".
func (t FailureType) String() string {
	switch t {
	case FailureNonRecoverable:
		return "non-recoverable"
	case FailurePartitionDataMissing:
		return "partition-data-missing"
	case FailureEnvironment:
		return "environment"
	case FailureRecoverable:
		return "recoverable"
	default:
		return fmt.Sprintf("FailureType(%d)", int(t))
	}
}

// Restartable reports whether a failure of this type may be restarted at
// all; only [FailureNonRecoverable] may not. Whether it actually is
// restarted is up to the [RestartBackoffTimeStrategy].
func (t FailureType) Restartable() bool {
	return t != FailureNonRecoverable
}

// Sentinel errors. Each marker produced by this package matches its sentinel
// with errors.Is, and wrapping a sentinel directly (for example
// fmt.Errorf("slot lost: %w", ErrEnvironment)) marks an error just as well.
var (
	// ErrNonRecoverable marks failures that must not be restarted.
	ErrNonRecoverable = errors.New("failure: non-recoverable failure")
	// ErrEnvironment marks failures caused by the environment.
	ErrEnvironment = errors.New("failure: environment failure")
	// ErrPartitionNotFound marks failures caused by missing partition data.
	ErrPartitionNotFound = errors.New("failure: result partition not found")
)

// NonRecoverable marks err as non-recoverable: [Classify] will return
// [FailureNonRecoverable] for it and for any error wrapping it, and no
// restart strategy may restart the job. Use it for a user's request to
// suppress restarts. The result unwraps to err. NonRecoverable(nil) is nil.
func NonRecoverable(err error) error {
	if err == nil || errors.Is(err, ErrNonRecoverable) {
		return err
	}
	return &markedError{err: err, mark: ErrNonRecoverable, prefix: "non-recoverable"}
}

// EnvironmentError marks err as caused by the environment (TaskManager lost,
// slot lost, heartbeat timeout, out of memory, ...): [Classify] returns
// [FailureEnvironment] unless a stronger mark is present. The result unwraps
// to err. EnvironmentError(nil) is nil.
func EnvironmentError(err error) error {
	if err == nil || errors.Is(err, ErrEnvironment) {
		return err // marked once: no repeated "environment failure:" prefix
	}
	return &markedError{err: err, mark: ErrEnvironment, prefix: "environment failure"}
}

// markedError adds a classification mark to an error without hiding it.
type markedError struct {
	err    error
	mark   error
	prefix string
}

func (e *markedError) Error() string        { return e.prefix + ": " + e.err.Error() }
func (e *markedError) Unwrap() error        { return e.err }
func (e *markedError) Is(target error) bool { return target == e.mark }

// PartitionNotFoundError reports that a consumer could not find the data of
// a result partition, so the partition's producer must run again. The
// scheduler maps ResultPartitionID back to the producing execution vertex.
// Always use it as a pointer (&PartitionNotFoundError{...}); it matches
// [ErrPartitionNotFound] with errors.Is and is extracted with errors.As.
type PartitionNotFoundError struct {
	// ResultPartitionID identifies the missing result partition.
	ResultPartitionID string
	// Detail is free text for humans, e.g. the TaskManager that was asked.
	Detail string
	// Cause is the underlying error, if any; Unwrap returns it.
	Cause error
	// Message, when set, is the whole message: a failure decoded from
	// another process reads as it did there.
	Message string
}

func (e *PartitionNotFoundError) Error() string {
	if e.Message != "" {
		return e.Message
	}
	msg := "result partition " + e.ResultPartitionID + " not found"
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

// Unwrap returns Cause.
func (e *PartitionNotFoundError) Unwrap() error { return e.Cause }

// Is reports whether target is [ErrPartitionNotFound].
func (e *PartitionNotFoundError) Is(target error) bool { return target == ErrPartitionNotFound }

// Classify returns the [FailureType] of err, looking through the whole
// wrapping chain (including errors.Join trees). Precedence, first match
// wins: a non-recoverable mark anywhere makes the failure
// [FailureNonRecoverable]; then missing partition data gives
// [FailurePartitionDataMissing]; then an environment mark gives
// [FailureEnvironment]; anything else is [FailureRecoverable].
//
// Classify(nil) returns FailureRecoverable: a nil error carries no mark, and
// the caller should not be reporting a failure without a cause anyway.
func Classify(err error) FailureType {
	switch {
	case err == nil:
		return FailureRecoverable
	case errors.Is(err, ErrNonRecoverable):
		return FailureNonRecoverable
	case errors.Is(err, ErrPartitionNotFound):
		return FailurePartitionDataMissing
	case errors.Is(err, ErrEnvironment):
		return FailureEnvironment
	default:
		return FailureRecoverable
	}
}
