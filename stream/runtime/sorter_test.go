package runtime

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"testing"
)

// sortPairs feeds n random pairs through a sorter with a budget of budget
// bytes and checks it yields them in key order, each once.
func sortPairs(t *testing.T, n int, budget int64) (*IOManager, *ExternalSorter) {
	t.Helper()
	io := NewIOManager([]string{t.TempDir()})
	t.Cleanup(func() { _ = io.Close() })
	mem := NewMemoryManager(budget)
	s := NewExternalSorter(BatchMemory{Memory: mem, IO: io}, "test")
	rng := rand.New(rand.NewSource(1))
	var want []string
	for i := range n {
		k := fmt.Sprintf("k%05d", rng.Intn(n/3+1))
		v := fmt.Sprintf("v%d", i)
		if i%997 == 0 {
			v = string(bytes.Repeat([]byte{'x'}, PageSize)) // a large entry
		}
		want = append(want, k+"="+v)
		if err := s.Add([]byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	it, err := s.Sorted()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var last []byte
	for {
		k, v, ok, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if bytes.Compare(k, last) < 0 {
			t.Fatalf("key %q after %q", k, last)
		}
		last = append(last[:0], k...)
		got = append(got, string(k)+"="+string(v))
	}
	sort.Strings(got)
	sort.Strings(want)
	if len(got) != len(want) {
		t.Fatalf("%d pairs, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("pair %d: %q, want %q", i, got[i], want[i])
		}
	}
	return io, s
}

func TestExternalSorterInMemory(t *testing.T) {
	io, s := sortPairs(t, 5000, 64<<20)
	if io.SpillFiles() != 0 {
		t.Fatalf("%d spill files under a large budget", io.SpillFiles())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if used := s.mem.Used(); used != 0 {
		t.Fatalf("%d bytes still reserved after Close", used)
	}
}

// A budget of a few pages spills well over maxMergeFanIn (4 here) runs: merged in
// passes, the result is exact, and Close leaves no file and no reservation.
func TestExternalSorterSpillsAndMerges(t *testing.T) {
	defer func(n int) { maxMergeFanIn = n }(maxMergeFanIn)
	maxMergeFanIn = 4
	io, s := sortPairs(t, 40_000, 4*PageSize)
	if io.SpillFiles() <= int64(maxMergeFanIn) {
		t.Fatalf("%d spill files, want more than %d (a merge pass)", io.SpillFiles(), maxMergeFanIn)
	}
	if s.Spilled == 0 || io.SpilledBytes() < s.Spilled {
		t.Fatalf("spilled %d bytes, I/O manager counted %d", s.Spilled, io.SpilledBytes())
	}
	if p := s.mem.Peak(); p > 4*PageSize+PageSize+minOffsets*8*2 {
		t.Fatalf("peak reservation %d exceeds the budget by more than one page", p)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range io.Dirs() {
		ents, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != 0 {
			t.Fatalf("%d spill files left after Close", len(ents))
		}
	}
	if used := s.mem.Used(); used != 0 {
		t.Fatalf("%d bytes still reserved after Close", used)
	}
	dirs := io.Dirs()
	if err := io.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("spill directory %s left after the I/O manager closed: %v", d, err)
		}
	}
}
