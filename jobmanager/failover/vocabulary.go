package failover

import (
	"errors"

	"github.com/gofl/gofl/failure"
	"github.com/gofl/gofl/rpc/pb"
)

// The failure vocabulary lives in package failure, which TaskManagers and
// the SDK import without the restart strategies; these names keep
// failover's callers compiling.

// FailureType is failure.FailureType.
type FailureType = failure.FailureType

// The failure types (failure.FailureNonRecoverable, ...).
const (
	FailureNonRecoverable       = failure.FailureNonRecoverable
	FailurePartitionDataMissing = failure.FailurePartitionDataMissing
	FailureEnvironment          = failure.FailureEnvironment
	FailureRecoverable          = failure.FailureRecoverable
)

// The marks' sentinels (failure.ErrNonRecoverable, ...).
var (
	ErrNonRecoverable    = failure.ErrNonRecoverable
	ErrEnvironment       = failure.ErrEnvironment
	ErrPartitionNotFound = failure.ErrPartitionNotFound
	// ErrInvalidConfig is matched (errors.Is) by every *ConfigError.
	ErrInvalidConfig = errors.New("failover: invalid restart configuration")
)

// PartitionNotFoundError is failure.PartitionNotFoundError.
type PartitionNotFoundError = failure.PartitionNotFoundError

// RemoteError is failure.RemoteError.
type RemoteError = failure.RemoteError

// NonRecoverable is failure.NonRecoverable.
func NonRecoverable(err error) error { return failure.NonRecoverable(err) }

// EnvironmentError is failure.EnvironmentError.
func EnvironmentError(err error) error { return failure.EnvironmentError(err) }

// Classify is failure.Classify.
func Classify(err error) FailureType { return failure.Classify(err) }

// Encode is failure.Encode.
func Encode(err error) *pb.FailureInfo { return failure.Encode(err) }

// Decode is failure.Decode.
func Decode(fi *pb.FailureInfo) error { return failure.Decode(fi) }
