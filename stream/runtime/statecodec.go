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

// appendEncoded appends a uvarint length and v encoded by c.
func appendEncoded(dst []byte, c Codec, v any, scratch *[]byte) ([]byte, error) {
	b, err := c.Append((*scratch)[:0], v)
	if err != nil {
		return dst, err
	}
	*scratch = b
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...), nil
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

// stateSection is the keyed section name of a KeyedStateBackend state.
func stateSection(name string) string { return "state:" + name }

// timerSection is the keyed section name of a TimerService.
func timerSection(name string) string { return "timers:" + name }

func errNoCodec(what string) error {
	return fmt.Errorf("runtime: %s has no codec registered", what)
}
