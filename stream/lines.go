package stream

import (
	"bufio"
	"strings"
)

// lineSlab is the size of the chunks a lineReader copies lines into: one
// allocation per chunk instead of one per line (a text source's every
// record). A line kept long after its record (in state, a window, a map)
// keeps its chunk's other lines' memory alive too, so the chunk stays
// small, as boxSlab does for boxed values: it bounds that overhead at
// lineSlab bytes per line kept. Lines longer than a quarter of it get
// their own allocation. Operators that keep values per key across records
// (the reduce combiner) keep their own copies of the strings (stringKeeper).
const lineSlab = 4 << 10

// maxKeptLong bounds the buffer a lineReader keeps for lines longer than
// its reader's buffer: one longer than it is gathered in a buffer dropped
// after the line.
const maxKeptLong = 1 << 20

// lineReader reads lines as strings, many per allocation (lineSlab). The
// strings are immutable as any: the bytes of a chunk are written once,
// before the string over them exists. Not safe for concurrent use.
type lineReader struct {
	r *bufio.Reader
	// slab is the current chunk: a Builder, whose buffer is allocated
	// without zeroing (every byte is written once, by a line) and only
	// appended to, so the strings over it stay as they are.
	slab strings.Builder
	long []byte // a line longer than r's buffer, gathered
}

// next returns the next line without its "\n" or "\r\n", and how many
// bytes of the input it took (with the terminator): 0 at the end of the
// input. err is what the underlying reader returned after the line
// (io.EOF at the end), as bufio.Reader.ReadString's.
func (l *lineReader) next() (line string, n int, err error) {
	b, err := l.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		l.long = append(l.long[:0], b...)
		for err == bufio.ErrBufferFull {
			b, err = l.r.ReadSlice('\n')
			l.long = append(l.long, b...)
		}
		b = l.long
		if cap(l.long) > maxKeptLong {
			l.long = nil
		}
	}
	n = len(b)
	if len(b) > 0 && b[len(b)-1] == '\n' {
		b = b[:len(b)-1]
	}
	if len(b) > 0 && b[len(b)-1] == '\r' {
		b = b[:len(b)-1]
	}
	return l.str(b), n, err
}

// skip discards the rest of the current line and returns how many bytes
// it took, without copying them.
func (l *lineReader) skip() (n int, err error) {
	for {
		b, err := l.r.ReadSlice('\n')
		n += len(b)
		if err != bufio.ErrBufferFull {
			return n, err
		}
	}
}

// str copies b into the current chunk (a new one when it has no room)
// and returns the string over the copy.
func (l *lineReader) str(b []byte) string {
	switch {
	case len(b) == 0:
		return ""
	case len(b) > lineSlab/4:
		return string(b)
	}
	if l.slab.Cap()-l.slab.Len() < len(b) {
		l.slab = strings.Builder{}
		l.slab.Grow(lineSlab)
	}
	start := l.slab.Len()
	l.slab.Write(b)
	return l.slab.String()[start:]
}
