package codec

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
)

// CorruptError describes why an input failed to decode. It wraps ErrCorrupt
// (and, for failures reported by a user-supplied element codec, that codec's
// error), so errors.Is(err, ErrCorrupt) holds for every decoding failure.
type CorruptError struct {
	// Offset is the byte offset, within the slice passed to Decode, at
	// which the problem was detected (usually the start of the bad item).
	Offset int
	// Path locates the item within the value, e.g. "main.Event.Word" or
	// "[]codec.Tuple2[string,int64][].F0"; it may be empty.
	Path string
	// Reason says what was wrong.
	Reason string

	err error // optional underlying error from an element codec
}

func (e *CorruptError) Error() string {
	s := ErrCorrupt.Error() + ": "
	if e.Path != "" {
		s += e.Path + ": "
	}
	return s + e.Reason + " (offset " + strconv.Itoa(e.Offset) + ")"
}

// Unwrap returns ErrCorrupt and the underlying element-codec error, if any.
func (e *CorruptError) Unwrap() []error {
	if e.err != nil {
		return []error{ErrCorrupt, e.err}
	}
	return []error{ErrCorrupt}
}

// corrupt builds a *CorruptError; it is only called on failure paths.
func corrupt(off int, format string, args ...any) error {
	return &CorruptError{Offset: off, Reason: fmt.Sprintf(format, args...)}
}

// prependPath adds seg in front of the error's path. Plan decoders create a
// fresh *CorruptError per failure, so mutating it in place is safe.
func prependPath(err error, seg string) error {
	if ce, ok := err.(*CorruptError); ok {
		ce.Path = seg + ce.Path
	}
	return err
}

// rebase adjusts an error returned by an element codec that decoded
// src[base:] so that it reports offsets relative to the outer input, and
// prefixes seg to its path. Errors that are not *CorruptError (a foreign
// codec breaking the contract) are wrapped into one.
func rebase(err error, base int, seg string) error {
	var ce *CorruptError
	if errors.As(err, &ce) {
		c := *ce
		c.Offset += base
		c.Path = seg + c.Path
		return &c
	}
	return &CorruptError{Offset: base, Path: seg, Reason: err.Error(), err: err}
}

// checkUsed validates the byte count reported by an element codec.
func checkUsed(n, avail, base int) error {
	if n < 0 || n > avail {
		return corrupt(base, "element codec reported %d bytes used of %d available", n, avail)
	}
	return nil
}

// UnsupportedError is returned by For (and reported by MustFor and
// Fingerprint) when a type cannot be given a codec.
type UnsupportedError struct {
	// Path locates the offending type, starting with the root type's name,
	// e.g. "main.Event.Handler".
	Path string
	// Type is the offending type.
	Type reflect.Type
	// Reason says why, e.g. "func() is not serializable".
	Reason string
}

func (e *UnsupportedError) Error() string {
	return "codec: " + e.Path + ": " + e.Reason
}
