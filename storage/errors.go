package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/gofl/gofl/internal/blob"
)

// Errors returned by this package wrap one of these sentinels (test with
// errors.Is); the underlying cause stays in the chain and in the message.
var (
	// ErrNotFound means the path (or blob) does not exist.
	ErrNotFound = errors.New("storage: not found")
	// ErrExist means the path exists and the operation does not replace it.
	ErrExist = errors.New("storage: already exists")
	// ErrPermission means the file system refused the operation.
	ErrPermission = errors.New("storage: permission denied")
	// ErrUnavailable means the file system could not be reached in time: the
	// HDFS NameNode or a DataNode refused the connection, timed out or hung
	// up. The message names the address(es) tried.
	ErrUnavailable = errors.New("storage: file system unavailable")
	// ErrDigestMismatch means downloaded bytes do not hash to their blob
	// key. It is returned wrapped together with blob.ErrDigestMismatch.
	ErrDigestMismatch = errors.New("storage: digest mismatch")
	// ErrInvalid means a bad argument: an unsupported URI scheme, a relative
	// path, a bad cluster ID or blob key (the latter also wraps
	// blob.ErrInvalidKey), or inconsistent options.
	ErrInvalid = errors.New("storage: invalid argument")
)

// classify maps a backend error to this package's sentinels. A nil result
// means no sentinel fits.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrExist), errors.Is(err, ErrPermission),
		errors.Is(err, ErrUnavailable), errors.Is(err, ErrDigestMismatch), errors.Is(err, ErrInvalid):
		return nil // already classified
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, blob.ErrNotFound):
		return ErrNotFound
	case errors.Is(err, fs.ErrExist), errors.Is(err, syscall.ENOTEMPTY):
		return ErrExist
	case errors.Is(err, fs.ErrPermission):
		return ErrPermission
	case errors.Is(err, blob.ErrDigestMismatch):
		return ErrDigestMismatch
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return nil
	}
	return nil
}

// isTransport reports whether err looks like a broken or timed-out
// connection rather than an answer from the server.
func isTransport(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.As(err, &oe), errors.As(err, &ne), errors.Is(err, os.ErrDeadlineExceeded),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, net.ErrClosed), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNREFUSED):
		return true
	}
	// colinmarc/hdfs reports a failed (re)connection as a plain string.
	return strings.Contains(err.Error(), "no available namenodes")
}

// wrapErr gives err a "storage: <kind>: <op> <uri>: <cause>" message that
// wraps both the matching sentinel and the cause.
func wrapErr(op, uri string, err error) error {
	if err == nil {
		return nil
	}
	if s := classify(err); s != nil {
		return fmt.Errorf("%w: %s %s: %w", s, op, uri, err)
	}
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrExist) || errors.Is(err, ErrPermission) ||
		errors.Is(err, ErrUnavailable) || errors.Is(err, ErrDigestMismatch) || errors.Is(err, ErrInvalid) {
		return err
	}
	return fmt.Errorf("storage: %s %s: %w", op, uri, err)
}
