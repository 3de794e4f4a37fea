package stream

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"testing"
)

// readAllLines reads input with a lineReader over a bufio.Reader of size
// bytes, returning the lines and the bytes each took.
func readAllLines(t *testing.T, input string, size int) (lines []string, took int) {
	t.Helper()
	l := lineReader{r: bufio.NewReaderSize(strings.NewReader(input), size)}
	for {
		line, n, err := l.next()
		took += n
		if n > 0 {
			lines = append(lines, line)
		}
		if err == io.EOF {
			return lines, took
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestLineReaderSplitsAsReadString checks the lines against the
// reference split (bufio's ReadString, the terminator and a "\r" before it
// trimmed), across chunk boundaries and lines longer than the buffer, and
// that lines read earlier are intact after many more.
func TestLineReaderSplitsAsReadString(t *testing.T) {
	long := strings.Repeat("x", 3*lineSlab)
	var b strings.Builder
	for i := 0; i < 2000; i++ {
		switch i % 7 {
		case 0:
			b.WriteString("\n") // an empty line
		case 1:
			fmt.Fprintf(&b, "crlf line %d\r\n", i)
		case 2:
			fmt.Fprintf(&b, "%s %d\n", long[:100+i], i) // longer than the 64-byte buffer and than lineSlab/4 at times
		default:
			fmt.Fprintf(&b, "line %d with some words\n", i)
		}
	}
	b.WriteString("last line without a newline\r")
	input := b.String()

	var want []string
	r := bufio.NewReader(strings.NewReader(input))
	for {
		line, err := r.ReadString('\n')
		if len(line) > 0 {
			want = append(want, strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r"))
		}
		if err != nil {
			break
		}
	}
	got, took := readAllLines(t, input, 64)
	if took != len(input) {
		t.Errorf("the lines took %d bytes, the input has %d", took, len(input))
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("line %d is %q, want %q", i, got[i], want[i])
		}
	}
}

func TestLineReaderSkip(t *testing.T) {
	l := lineReader{r: bufio.NewReaderSize(strings.NewReader(strings.Repeat("y", 100)+"\nnext\n"), 16)}
	if n, err := l.skip(); n != 101 || err != nil {
		t.Fatalf("skip took %d bytes (%v), want 101", n, err)
	}
	if line, n, err := l.next(); line != "next" || n != 5 || err != nil {
		t.Fatalf("next line %q, %d bytes (%v), want \"next\", 5", line, n, err)
	}
}

// TestLineReaderAllocatesPerChunk checks that short lines share their
// allocations: a text source's per-record cost.
func TestLineReaderAllocatesPerChunk(t *testing.T) {
	line := strings.Repeat("w", 79) + "\n"
	const lines = 1000
	input := strings.Repeat(line, lines)
	src := strings.NewReader(input)
	l := lineReader{r: bufio.NewReaderSize(src, 64<<10)}
	allocs := testing.AllocsPerRun(5, func() {
		src.Reset(input)
		l.r.Reset(src)
		for i := 0; i < lines; i++ {
			if s, _, _ := l.next(); len(s) != 79 {
				t.Fatalf("line of %d bytes, want 79", len(s))
			}
		}
	})
	if max := float64(lines*len(line)/lineSlab + 2); allocs > max {
		t.Errorf("%v allocations for %d lines of %d bytes, want at most %v (one per %d-byte chunk)", allocs, lines, len(line), max, lineSlab)
	}
}

// BenchmarkLineReader is a text source's per-line cost of reading.
func BenchmarkLineReader(b *testing.B) {
	input := strings.Repeat(strings.Repeat("word ", 16)+"\n", 1000)
	src := strings.NewReader(input)
	l := lineReader{r: bufio.NewReaderSize(src, 64<<10)}
	b.SetBytes(int64(len(input)))
	b.ReportAllocs()
	for b.Loop() {
		src.Reset(input)
		l.r.Reset(src)
		for {
			if _, _, err := l.next(); err != nil {
				break
			}
		}
	}
}
