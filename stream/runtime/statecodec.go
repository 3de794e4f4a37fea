package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Keyed sections are runs of entries, each a uvarint length and bytes of
// the key, then a uvarint length and bytes of the value.

// ErrCorruptState is a keyed section that does not parse.
var ErrCorruptState = errors.New("runtime: corrupt state section")

// appendEncoded appends a uvarint length and v encoded by c. It encodes
// v straight into dst after a guessed length prefix of *width bytes (the
// width of the previous value's length), so a value is copied once; a
// wrong guess moves just this value and updates *width.
func appendEncoded(dst []byte, c Codec, v any, width *int) ([]byte, error) {
	w := *width
	if w <= 0 || w > binary.MaxVarintLen64 {
		w = 1
	}
	start := len(dst)
	dst = append(dst, zeroPrefix[:w]...)
	out, err := c.Append(dst, v)
	if err != nil {
		return dst[:start], err
	}
	n := len(out) - start - w
	if need := uvarintLen(uint64(n)); need != w {
		if need > w {
			out = append(out, zeroPrefix[:need-w]...)
		}
		copy(out[start+need:], out[start+w:start+w+n])
		out = out[:start+need+n]
		*width = need
	}
	binary.PutUvarint(out[start:], uint64(n))
	return out, nil
}

var zeroPrefix [binary.MaxVarintLen64]byte

// uvarintLen is the length of x's uvarint encoding.
func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// readField reads one length-prefixed field of data.
func readField(data []byte) (field, rest []byte, err error) {
	n, k := binary.Uvarint(data)
	if k <= 0 || uint64(len(data)-k) < n {
		return nil, nil, ErrCorruptState
	}
	return data[k : k+int(n)], data[k+int(n):], nil
}

// rangeEntries calls fn for every key and value of a section.
func rangeEntries(data []byte, fn func(key, value []byte) error) error {
	for len(data) > 0 {
		k, rest, err := readField(data)
		if err != nil {
			return err
		}
		v, rest, err := readField(rest)
		if err != nil {
			return err
		}
		if err := fn(k, v); err != nil {
			return err
		}
		data = rest
	}
	return nil
}

// countEntries is the number of entries of a section.
func countEntries(data []byte) (int, error) {
	n := 0
	for len(data) > 0 {
		for range 2 {
			l, k := binary.Uvarint(data)
			if k <= 0 || uint64(len(data)-k) < l {
				return 0, ErrCorruptState
			}
			data = data[k+int(l):]
		}
		n++
	}
	return n, nil
}

// stateSection is the keyed section name of a KeyedStateBackend state.
func stateSection(name string) string { return "state:" + name }

// timerSection is the keyed section name of a TimerService.
func timerSection(name string) string { return "timers:" + name }

func errNoCodec(what string) error {
	return fmt.Errorf("runtime: %s has no codec registered", what)
}
