package codec

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// appendUvarint appends x in the LEB128 form used by encoding/binary.
func appendUvarint(dst []byte, x uint64) []byte {
	for x >= 0x80 {
		dst = append(dst, byte(x)|0x80)
		x >>= 7
	}
	return append(dst, byte(x))
}

// appendVarint appends x zig-zag encoded, so small magnitudes of either
// sign are short.
func appendVarint(dst []byte, x int64) []byte {
	return appendUvarint(dst, uint64(x<<1)^uint64(x>>63))
}

// readUvarint reads a uvarint starting at src[i]. It requires the minimal
// encoding (no redundant trailing 0x80/0x00 groups) and at most 64 bits, so
// every value has exactly one accepted encoding.
func readUvarint(src []byte, i int) (uint64, int, error) {
	if i < len(src) && src[i] < 0x80 {
		return uint64(src[i]), i + 1, nil
	}
	return readUvarintSlow(src, i)
}

func readUvarintSlow(src []byte, i int) (uint64, int, error) {
	if i < 0 || i >= len(src) {
		return 0, i, corrupt(i, "truncated varint")
	}
	if len(src)-i >= 8 {
		// Branch-free path for varints of up to 8 bytes (56 bits): load 8
		// bytes, find the first byte without a continuation bit, then
		// squeeze out the continuation bits.
		w := binary.LittleEndian.Uint64(src[i:])
		if stop := ^w & 0x8080808080808080; stop != 0 {
			nb := bits.TrailingZeros64(stop)/8 + 1
			if nb > 1 && w>>(8*(nb-1))&0xff == 0 {
				return 0, i, corrupt(i, "non-minimal varint")
			}
			w &= 0x7f7f7f7f7f7f7f7f >> (64 - 8*nb)
			x := w&0x7f | w>>1&(0x7f<<7) | w>>2&(0x7f<<14) | w>>3&(0x7f<<21) |
				w>>4&(0x7f<<28) | w>>5&(0x7f<<35) | w>>6&(0x7f<<42) | w>>7&(0x7f<<49)
			return x, i + nb, nil
		}
	}
	var x uint64
	for k, b := range src[i:] {
		if b < 0x80 {
			if k == binary.MaxVarintLen64-1 && b > 1 {
				return 0, i, corrupt(i, "varint overflows 64 bits")
			}
			if b == 0 && k > 0 {
				return 0, i, corrupt(i, "non-minimal varint")
			}
			return x | uint64(b)<<(7*k), i + k + 1, nil
		}
		if k == binary.MaxVarintLen64-1 {
			return 0, i, corrupt(i, "varint overflows 64 bits")
		}
		x |= uint64(b&0x7f) << (7 * k)
	}
	return 0, i, corrupt(i, "truncated varint")
}

// readVarint reads a zig-zag encoded signed varint.
func readVarint(src []byte, i int) (int64, int, error) {
	u, j, err := readUvarint(src, i)
	return int64(u>>1) ^ -int64(u&1), j, err
}

// readLen reads a length or count prefix at src[i] and checks that count
// items of at least min bytes each fit in the rest of src. It never lets a
// claimed length drive an allocation larger than the input justifies.
func readLen(src []byte, i, min int, what string) (int, int, error) {
	u, j, err := readUvarint(src, i)
	if err != nil {
		return 0, i, err
	}
	if min < 1 {
		min = 1
	}
	if u > uint64((len(src)-j)/min) {
		if min == 1 {
			return 0, i, corrupt(i, "%s length %d exceeds the %d remaining bytes", what, u, len(src)-j)
		}
		return 0, i, corrupt(i, "%s length %d needs at least %d bytes per item but only %d bytes remain", what, u, min, len(src)-j)
	}
	return int(u), j, nil
}

// Fixed-width little-endian helpers.

func readFixed32(src []byte, i int, what string) (uint32, int, error) {
	if len(src)-i < 4 {
		return 0, i, corrupt(i, "truncated %s: need 4 bytes, have %d", what, len(src)-i)
	}
	return binary.LittleEndian.Uint32(src[i:]), i + 4, nil
}

func readFixed64(src []byte, i int, what string) (uint64, int, error) {
	if len(src)-i < 8 {
		return 0, i, corrupt(i, "truncated %s: need 8 bytes, have %d", what, len(src)-i)
	}
	return binary.LittleEndian.Uint64(src[i:]), i + 8, nil
}

func readByte(src []byte, i int, what string) (byte, int, error) {
	if i >= len(src) {
		return 0, i, corrupt(i, "truncated %s: need 1 byte, have 0", what)
	}
	return src[i], i + 1, nil
}

func readBool(src []byte, i int) (bool, int, error) {
	b, j, err := readByte(src, i, "bool")
	if err != nil {
		return false, i, err
	}
	if b > 1 {
		return false, i, corrupt(i, "invalid bool byte 0x%02x", b)
	}
	return b == 1, j, nil
}

func readString(src []byte, i int) (string, int, error) {
	n, j, err := readLen(src, i, 1, "string")
	if err != nil {
		return "", i, err
	}
	return string(src[j : j+n]), j + n, nil
}

// readBytes copies a length-prefixed byte string; empty decodes as nil.
// The result never aliases src.
func readBytes(src []byte, i int) ([]byte, int, error) {
	n, j, err := readLen(src, i, 1, "bytes")
	if err != nil {
		return nil, i, err
	}
	if n == 0 {
		return nil, j, nil
	}
	b := make([]byte, n)
	copy(b, src[j:])
	return b, j + n, nil
}

func appendString(dst []byte, s string) []byte {
	dst = appendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBytes(dst []byte, b []byte) []byte {
	dst = appendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// zeroTimeNanos is the wire value of the zero time.Time, whose UnixNano is
// otherwise undefined. It is the (representable but implausible) instant
// 1677-09-21T00:12:43.145224192Z, which therefore decodes as the zero Time.
const zeroTimeNanos = math.MinInt64
