package network

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
)

// ErrPartitionConnection is matched (errors.Is) by every
// PartitionConnectionError.
var ErrPartitionConnection = errors.New("network: cannot reach the producer of a partition")

// errManagerClosed is this runner shutting its data plane down: never a
// producer's fault.
var errManagerClosed = errors.New("network: connection manager closed")

// PartitionException is an input channel's failure to read its partition
// that makes the partition's data missing for the consumer (Flink's
// PartitionException): a *PartitionNotFoundError or a
// *PartitionConnectionError. The task executor reports it as
// partition-data-missing for ConsumedPartition().Partition, so the JobMaster
// reruns that partition's producer instead of restarting the consumer
// against the same dead producer.
type PartitionException interface {
	error
	// ConsumedPartition names the partition, subpartition and producer
	// address the channel was reading.
	ConsumedPartition() InputChannelSpec
}

// PartitionConnectionError (Flink's PartitionConnectionException) says that
// a remote input channel cannot read its partition because the connection
// to the producer's data address failed: it could not be established
// (refused, reset or closed before the handshake, host unreachable, timed
// out) or it broke while the channel still expected data, before
// EndOfPartition. The producer's runner is presumably gone and its
// partitions with it, so this is missing partition data like
// PartitionNotFoundError: it matches ErrPartitionNotFound as well as
// ErrPartitionConnection. A connection shared by several channels fails
// each of them with its own partition.
type PartitionConnectionError struct {
	ID           ResultPartitionID
	Subpartition int
	// Remote is the producer's data address.
	Remote string
	// Lost is set when an established connection broke (after the
	// handshake), rather than the connection attempt failing.
	Lost bool
	// Err is the transport error.
	Err error
}

func (e *PartitionConnectionError) Error() string {
	if e.Lost {
		return fmt.Sprintf("lost connection to producer of partition %s at %s: %s", e.ID, e.Remote, connReason(e.Err))
	}
	return fmt.Sprintf("cannot connect to producer of partition %s at %s: %s", e.ID, e.Remote, connReason(e.Err))
}

func (e *PartitionConnectionError) Unwrap() error { return e.Err }

// Is matches ErrPartitionConnection and ErrPartitionNotFound.
func (e *PartitionConnectionError) Is(target error) bool {
	return target == ErrPartitionConnection || target == ErrPartitionNotFound
}

// ConsumedPartition implements PartitionException.
func (e *PartitionConnectionError) ConsumedPartition() InputChannelSpec {
	return InputChannelSpec{Partition: e.ID, Subpartition: e.Subpartition, Address: e.Remote}
}

// connReason is the short cause of a transport error ("connection
// refused"), without the dial/read/address noise of *net.OpError.
func connReason(err error) string {
	var errno syscall.Errno
	var ne net.Error
	var oe *net.OpError
	switch {
	case err == nil:
		return "unknown error"
	case errors.As(err, &errno):
		return errno.Error()
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed by peer"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "i/o timeout"
	case errors.As(err, &oe) && oe.Err != nil:
		return oe.Err.Error()
	}
	return err.Error()
}

// isConnectionLoss tells a broken or failed transport (EOF, reset, refused,
// unreachable, timeout) from a protocol violation, an error the producer
// reported, or this side closing the connection.
func isConnectionLoss(err error) bool {
	var errno syscall.Errno
	var ne net.Error
	switch {
	case err == nil, errors.Is(err, errManagerClosed), errors.Is(err, net.ErrClosed):
		return false
	case errors.As(err, new(*ProtocolError)):
		return false
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, context.DeadlineExceeded):
		return true
	}
	return errors.As(err, &errno) || errors.As(err, &ne)
}
