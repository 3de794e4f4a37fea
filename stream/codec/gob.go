package codec

import (
	"bytes"
	"encoding/gob"
	"fmt"
)

// Gob returns a codec that encodes each record as a self-contained
// encoding/gob stream behind a uvarint length. It exists for types For
// cannot handle (interface-typed fields with gob.Register'ed concrete
// types, types with custom GobEncoder/BinaryMarshaler methods) and must be
// chosen explicitly: nothing in gofl falls back to it automatically.
//
// It is slow. Every record carries gob's type description and every call
// builds a fresh gob encoder or decoder, so expect it to be one to two
// orders of magnitude slower, and several times larger, than For. Append
// panics if gob cannot encode the value (gob's own type rules apply).
// Decoding validates the length prefixes of the record and of each gob
// message before handing the bytes to gob, and turns gob failures and
// panics into ErrCorrupt.
func Gob[T any]() Codec[T] { return gobCodec[T]{} }

type gobCodec[T any] struct{}

func (gobCodec[T]) Append(dst []byte, v T) []byte {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(&v); err != nil {
		panic(fmt.Sprintf("codec: Gob[%T]: %v", v, err))
	}
	dst = appendUvarint(dst, uint64(buf.Len()))
	return append(dst, buf.Bytes()...)
}

func (gobCodec[T]) Decode(src []byte) (v T, n int, err error) {
	size, i, err := readLen(src, 0, 1, "gob record")
	if err != nil {
		return v, 0, err
	}
	payload := src[i : i+size]
	if err := checkGobFraming(payload, i); err != nil {
		return v, 0, err
	}
	defer func() {
		if r := recover(); r != nil {
			var zero T
			v, n, err = zero, 0, corrupt(i, "gob: %v", r)
		}
	}()
	if err := gob.NewDecoder(bytes.NewReader(payload)).Decode(&v); err != nil {
		var zero T
		return zero, 0, &CorruptError{Offset: i, Reason: "gob: " + err.Error(), err: err}
	}
	return v, i + size, nil
}

func (gobCodec[T]) minSize() int { return 1 }

// checkGobFraming walks the gob messages in p (each a gob-encoded uint
// byte count followed by that many bytes) and rejects counts that run past
// the end, so gob never sizes a buffer from an unchecked count.
func checkGobFraming(p []byte, base int) error {
	for i := 0; i < len(p); {
		start := i
		var count uint64
		b := p[i]
		i++
		if b < 0x80 {
			count = uint64(b)
		} else {
			width := int(-int8(b))
			if width < 1 || width > 8 || len(p)-i < width {
				return corrupt(base+start, "bad gob message length")
			}
			for _, c := range p[i : i+width] {
				count = count<<8 | uint64(c)
			}
			i += width
		}
		if count == 0 || count > uint64(len(p)-i) {
			return corrupt(base+start, "gob message length %d exceeds the %d remaining bytes", count, len(p)-i)
		}
		i += int(count)
	}
	return nil
}
