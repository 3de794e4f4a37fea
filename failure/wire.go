package failure

import (
	"errors"

	"github.com/gofl/gofl/rpc/pb"
)

// RemoteError is a failure reported by another process (a TaskManager or a
// job runner): its message and stack as text.
type RemoteError struct {
	Message string
	Stack   string
}

func (e *RemoteError) Error() string { return e.Message }

// StackTrace returns the remote stack, for errors that carry one.
func (e *RemoteError) StackTrace() string { return e.Stack }

// stackTracer is implemented by errors that know where they happened, such
// as a recovered panic.
type stackTracer interface{ StackTrace() string }

// Encode turns a task failure into its wire form, keeping its
// classification, stack and missing partition.
func Encode(err error) *pb.FailureInfo {
	if err == nil {
		return nil
	}
	// Type carries the classification, so the message leaves out the
	// marks' prefixes: Decode adds one back, and a failure relayed over
	// several hops reads "non-recoverable: ..." once.
	msg := err
	for {
		m, ok := msg.(*markedError)
		if !ok {
			break
		}
		msg = m.err
	}
	fi := &pb.FailureInfo{Type: Classify(err).String(), Message: msg.Error()}
	var st stackTracer
	if errors.As(err, &st) {
		fi.Stack = st.StackTrace()
	}
	var pnf *PartitionNotFoundError
	if errors.As(err, &pnf) {
		fi.MissingPartition = pnf.ResultPartitionID
	}
	return fi
}

// Decode is the inverse of Encode: an error that classifies as the original
// did and unwraps to a *RemoteError.
func Decode(fi *pb.FailureInfo) error {
	if fi == nil {
		return nil
	}
	err := error(&RemoteError{Message: fi.Message, Stack: fi.Stack})
	switch fi.Type {
	case FailureNonRecoverable.String():
		return NonRecoverable(err)
	case FailureEnvironment.String():
		return EnvironmentError(err)
	case FailurePartitionDataMissing.String():
		return &PartitionNotFoundError{ResultPartitionID: fi.MissingPartition, Message: fi.Message, Cause: err}
	}
	return err
}
