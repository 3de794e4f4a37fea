// Package codec serializes records as they cross process boundaries: typed,
// allocation-light codecs with fast paths for integers, floats, strings,
// byte slices, and tuple and struct types. encoding/gob is never on the hot
// path.
package codec

import "errors"

// ErrCorrupt is wrapped by every decoding failure: bytes from the network
// are never trusted, so decoding returns errors instead of panicking.
var ErrCorrupt = errors.New("codec: corrupt record")

// Codec encodes and decodes values of one type. Implementations are
// stateless and safe for concurrent use.
type Codec[T any] interface {
	// Append appends v's encoding to dst and returns the extended slice.
	Append(dst []byte, v T) []byte
	// Decode reads one value from the front of src and reports how many
	// bytes it used. It never panics; malformed input returns an error
	// wrapping ErrCorrupt.
	Decode(src []byte) (v T, n int, err error)
}
