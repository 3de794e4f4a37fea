// Package codec serializes records as they cross process boundaries: typed,
// allocation-light codecs with fast paths for integers, floats, strings,
// byte slices, and tuple and struct types. encoding/gob is never on the hot
// path.
//
// # Model
//
// Every edge of a job graph that crosses a process boundary carries records
// of one Go type T, encoded by a Codec[T]. A Codec appends a record's bytes
// to a caller-owned buffer (so the network layer can batch records into one
// buffer and reuse it) and decodes one record from the front of a buffer,
// reporting how many bytes it used. Records are not self-describing and
// carry no framing of their own beyond what their type needs: producer and
// consumer must agree on the codec, which the runtime checks by comparing
// Fingerprint values when it wires an edge.
//
// There are three ways to get a codec:
//
//   - Built-in codecs for scalars: Bool, Int..Int64, Uint..Uint64 (varints),
//     Int32Fixed..Uint64Fixed (fixed width), Float32, Float64, String,
//     Bytes, Time, Duration.
//   - Composition: TupleCodec2, TupleCodec3 (for Tuple2 and Tuple3),
//     SliceOf, MapOf and Pointer build codecs from element codecs, with no
//     reflection at all.
//   - Derivation: For[T] (or MustFor[T] for package-level variables) builds
//     a codec for any struct, slice, array, map, pointer or tuple made of
//     the supported kinds. Reflection runs once per type to compile a plan
//     (cached in a sync.Map); records are then encoded and decoded by the
//     plan directly on the value's memory. With default encodings, derived
//     and composed codecs produce identical bytes for the same shape.
//
// Gob[T] is an explicit, slow fallback for types that cannot be derived
// (interface fields, custom marshalers). It is never chosen automatically.
//
// # Wire format
//
// Signed integers are zig-zag varints, unsigned integers uvarints, 8-bit
// integers one byte, floats and *Fixed integers little-endian fixed width,
// bools one byte (0 or 1), strings and []byte a uvarint length and the bytes,
// time.Time its Unix nanoseconds as a varint, slices and maps a uvarint count
// and the elements, arrays their elements, pointers a flag byte (0 nil, 1
// present) and the pointee, structs and tuples their fields in order. Varints
// must be minimal, so apart from map entry order every value has exactly one
// encoding. Map entries follow Go's randomized iteration order: encoded
// bytes of map-bearing values are not canonical and must not be hashed or
// compared. Empty and nil slices and maps both decode as nil.
//
// # Safety and performance
//
// Decoding treats input as hostile: every length and count is checked
// against the bytes that remain (weighted by the element's minimum encoded
// size) before anything is allocated, varints must be well formed, nesting
// is bounded by MaxDepth, and failures are returned as *CorruptError values
// wrapping ErrCorrupt, with the byte offset and the path within the value.
// Decoded values never alias the input buffer.
//
// Encoding with built-in, composed or derived codecs does not allocate
// (beyond growing dst); decoding allocates only what the value itself needs
// (string and slice contents, pointees, maps). All codecs are safe for
// concurrent use.
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
