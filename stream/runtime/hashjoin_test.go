package runtime

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"testing"
)

type hjPair struct{ k, v string }

// hashJoinReference is a nested map join: "m|probe|build" per match, "p|probe"
// per unmatched probe entry and "b|build" per unmatched build entry (outer
// sides only).
func hashJoinReference(build, probe []hjPair, probeOuter, buildOuter bool) []string {
	byKey := map[string][]int{}
	for i, b := range build {
		byKey[b.k] = append(byKey[b.k], i)
	}
	matched := make([]bool, len(build))
	var out []string
	for _, p := range probe {
		is := byKey[p.k]
		for _, i := range is {
			matched[i] = true
			out = append(out, "m|"+p.v+"|"+build[i].v)
		}
		if len(is) == 0 && probeOuter {
			out = append(out, "p|"+p.v)
		}
	}
	if buildOuter {
		for i, b := range build {
			if !matched[i] {
				out = append(out, "b|"+b.v)
			}
		}
	}
	slices.Sort(out)
	return out
}

// runHashJoin joins build with probe under budget bytes and returns the
// sorted results, the bytes spilled and the memory manager.
func runHashJoin(t *testing.T, build, probe []hjPair, budget int64, probeOuter, buildOuter bool) ([]string, int64, *MemoryManager) {
	t.Helper()
	dir := t.TempDir()
	iom := NewIOManager([]string{dir})
	defer func() { _ = iom.Close() }()
	mem := NewMemoryManager(budget)
	var out []string
	fns := HashJoinFuncs{Match: func(p, b []byte) error { out = append(out, "m|"+string(p)+"|"+string(b)); return nil }}
	if probeOuter {
		fns.ProbeUnmatched = func(p []byte) error { out = append(out, "p|"+string(p)); return nil }
	}
	if buildOuter {
		fns.BuildUnmatched = func(b []byte) error { out = append(out, "b|"+string(b)); return nil }
	}
	j := NewHybridHashJoin(BatchMemory{Memory: mem, IO: iom}, "test", fns)
	for _, b := range build {
		if err := j.AddBuild([]byte(b.k), []byte(b.v)); err != nil {
			t.Fatal(err)
		}
	}
	j.EndBuild()
	for _, p := range probe {
		if err := j.Probe([]byte(p.k), []byte(p.v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if mem.Used() != 0 {
		t.Fatalf("%d bytes of managed memory still reserved after Close", mem.Used())
	}
	for _, d := range iom.Dirs() {
		if es, _ := os.ReadDir(d); len(es) != 0 {
			t.Fatalf("%d spill files left after Close", len(es))
		}
	}
	slices.Sort(out)
	return out, j.Spilled, mem
}

func hjInputs(rng *rand.Rand, n, keys int, hot float64, pad int) []hjPair {
	out := make([]hjPair, n)
	for i := range out {
		k := rng.Intn(keys)
		if rng.Float64() < hot {
			k = -1 // one skewed key
		}
		out[i] = hjPair{fmt.Sprintf("key%d%s", k, bytes.Repeat([]byte{'.'}, pad)), fmt.Sprintf("%d/%d", k, i)}
	}
	return out
}

// The hybrid hash join against a nested map join: a budget that fits, one
// that spills (recursion), and a hot key larger than the budget (the
// block-nested-loop fallback), for the inner join and both outer sides.
// The managed-memory accounting never exceeds the budget.
func TestHybridHashJoinMatchesReference(t *testing.T) {
	cases := []struct {
		name          string
		nb, np, keys  int
		hot           float64
		pad           int
		budget        int64
		wantSpill     bool
		maxLevelForce int
	}{
		{name: "fits", nb: 3000, np: 4000, keys: 1500, budget: 8 << 20},
		{name: "spills", nb: 15000, np: 10000, keys: 10000, pad: 20, budget: 128 << 10, wantSpill: true},
		{name: "hotKey", nb: 8000, np: 1000, keys: 2000, hot: 0.5, pad: 20, budget: 96 << 10, wantSpill: true},
		{name: "oneLevel", nb: 20000, np: 5000, keys: 8000, pad: 20, budget: 128 << 10, wantSpill: true, maxLevelForce: 1},
	}
	for _, c := range cases {
		for _, outer := range []string{"inner", "probeOuter", "buildOuter"} {
			t.Run(c.name+"/"+outer, func(t *testing.T) {
				if c.maxLevelForce > 0 {
					old := maxHashJoinLevel
					maxHashJoinLevel = c.maxLevelForce
					defer func() { maxHashJoinLevel = old }()
				}
				rng := rand.New(rand.NewSource(7))
				build := hjInputs(rng, c.nb, c.keys, c.hot, c.pad)
				probe := hjInputs(rng, c.np, c.keys*3/2, c.hot/10, c.pad)
				po, bo := outer == "probeOuter", outer == "buildOuter"
				want := hashJoinReference(build, probe, po, bo)
				got, spilled, mem := runHashJoin(t, build, probe, c.budget, po, bo)
				if !slices.Equal(got, want) {
					t.Fatalf("%d results, want %d (first differences: %v)", len(got), len(want), firstDiff(got, want))
				}
				if c.wantSpill != (spilled > 0) {
					t.Fatalf("spilled %d bytes, want spilling %v", spilled, c.wantSpill)
				}
				if mem.Peak() > mem.Size() {
					t.Fatalf("managed memory peaked at %d bytes, over the budget of %d", mem.Peak(), mem.Size())
				}
				t.Logf("%d results, %d bytes spilled, peak %d of %d", len(got), spilled, mem.Peak(), mem.Size())
			})
		}
	}
}

func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("at %d: got %q, want %q", i, got[i], want[i])
		}
	}
	return "one is a prefix of the other"
}
