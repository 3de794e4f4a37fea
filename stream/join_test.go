package stream_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/internal/clustertest"
	"github.com/gofl/gofl/internal/joinsuite"
	"github.com/gofl/gofl/stream"
	"github.com/gofl/gofl/stream/runtime"
)

func runJoinSuite(t *testing.T, spec joinsuite.Spec, opts ...stream.Option) {
	t.Helper()
	env := stream.NewEnvironment(append([]stream.Option{stream.WithRuntimeMode(stream.Batch)}, opts...)...)
	res := joinsuite.Build(env, spec).Collect()
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := res.Values()
	sort.Strings(got)
	want := joinsuite.Expected(spec)
	if diff := diffMultiset(got, want); diff != "" {
		t.Fatalf("%d results, want %d; they differ from the reference:\n%s", len(got), len(want), diff)
	}
}

// The inner join, left outer join and CoGroup against their plain-Go
// reference in the local executor: duplicate keys, keys only one side has,
// and empty sides.
func TestJoinSuiteLocal(t *testing.T) {
	specs := map[string]joinsuite.Spec{
		"dups":       {NA: 2000, NB: 1500, Keys: 300},
		"emptyLeft":  {NA: 0, NB: 500, Keys: 100},
		"emptyRight": {NA: 500, NB: 0, Keys: 100},
		"bothEmpty":  {Keys: 10},
	}
	want := joinsuite.Expected(specs["dups"])
	kinds := map[string]int{}
	for _, l := range want {
		kind := l[:strings.IndexByte(l, '|')]
		if strings.HasSuffix(l, "|-") {
			kind += "-unmatched"
		}
		if strings.HasPrefix(l, "cogroup|") && (strings.Contains(l, "|0|")) {
			kind += "-oneside"
		}
		kinds[kind]++
	}
	for _, k := range []string{"inner", "left", "left-unmatched", "cogroup", "cogroup-oneside"} {
		if kinds[k] == 0 {
			t.Fatalf("the reference has no %q results: the suite does not exercise it (%v)", k, kinds)
		}
	}
	for name, spec := range specs {
		for _, p := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/p%d", name, p), func(t *testing.T) {
				runJoinSuite(t, spec, stream.WithParallelism(p))
			})
		}
	}
}

// spillFiles lists the spill files under dir.
func spillFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			out = append(out, path)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return out
}

// Under a 1 MiB budget the joins spill (counted by the numSpilledBytes
// metric), the results are exact, and no spill file is left.
func TestJoinSpillsUnderTinyBudget(t *testing.T) {
	dir := t.TempDir()
	m := runtime.NewLocalMetrics()
	spec := joinsuite.Spec{NA: 20_000, NB: 15_000, Keys: 2000, Pad: 24}
	runJoinSuite(t, spec, stream.WithParallelism(2), stream.WithManagedMemory(1<<20), stream.WithTmpDirs(dir), stream.WithMetrics(m))
	var spilled float64
	for name, v := range m.Snapshot() {
		if strings.HasSuffix(name, ".numSpilledBytes") {
			spilled += v
		}
	}
	if spilled == 0 {
		t.Fatalf("no join spilled under a 1 MiB budget: %v", m.Snapshot())
	}
	t.Logf("the joins spilled %.0f bytes", spilled)
	if left := spillFiles(t, dir); len(left) != 0 {
		t.Fatalf("spill files left after the job: %v", left)
	}
}

// Cancelling a job while its join spills leaves no spill file.
func TestJoinCancelMidSpillLeavesNoFiles(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	spec := joinsuite.Spec{NA: 60_000, NB: 1000, Keys: 4000, Pad: 24}
	env := stream.NewEnvironment(stream.WithRuntimeMode(stream.Batch), stream.WithManagedMemory(1<<20), stream.WithTmpDirs(dir))
	a := stream.Generate(env, spec.NA, spec.LeftAt)
	// The right input stalls half way until the job is cancelled: the
	// join has all of the left input and spilled it.
	b := stream.Generate(env, spec.NB, func(i int64) joinsuite.Right {
		if i == spec.NB/2 {
			<-ctx.Done()
		}
		return spec.RightAt(i)
	})
	stream.InnerJoin(stream.KeyBy(a, func(l joinsuite.Left) string { return l.Key }),
		stream.KeyBy(b, func(r joinsuite.Right) string { return r.Key }),
		func(l joinsuite.Left, r joinsuite.Right) int64 { return l.V + r.W }).Collect()
	cancelOnceSpilled(t, ctx, cancel, env, dir, "join-")
}

// cancelOnceSpilled runs env until a spill file named prefix* appears
// under dir, cancels it, and checks the job failed and left no spill file.
func cancelOnceSpilled(t *testing.T, ctx context.Context, cancel func(), env *stream.Environment, dir, prefix string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { _, err := env.Execute(ctx); done <- err }()
	clustertest.Eventually(t, 2*time.Minute, "a spill file "+prefix+"*", func() bool {
		for _, f := range spillFiles(t, dir) {
			if strings.HasPrefix(filepath.Base(f), prefix) {
				return true
			}
		}
		select {
		case err := <-done:
			t.Fatalf("the job ended before a spill file %s* appeared: %v", prefix, err)
		default:
		}
		return false
	})
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled job succeeded")
	}
	if left := spillFiles(t, dir); len(left) != 0 {
		t.Fatalf("spill files left after cancelling: %v", left)
	}
}

// The checksum form of the suite (what the cluster's memory-bound test and
// bench-join check) agrees with its per-key reference.
func TestJoinChecksumLocal(t *testing.T) {
	spec := joinsuite.Spec{NA: 5000, NB: 4000, Keys: 1500}
	env := stream.NewEnvironment(stream.WithRuntimeMode(stream.Batch), stream.WithParallelism(2))
	res := joinsuite.BuildChecksum(env, spec).Collect()
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := res.Values()
	sort.Strings(got)
	want := joinsuite.ExpectedChecksum(spec)
	if len(want) != 2 || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("checksums %q, want %q", got, want)
	}
}

// The hybrid hash join (either build side) against the suite's reference:
// a budget that fits, and a 1 MiB budget that spills, with a hot key
// larger than the budget (the block-nested-loop fallback); no spill file
// is left.
func TestHashJoinSuiteLocal(t *testing.T) {
	for _, hint := range []stream.JoinHint{stream.RepartitionHashFirst, stream.RepartitionHashSecond} {
		for name, spec := range map[string]joinsuite.Spec{
			"fits":   {NA: 2000, NB: 1500, Keys: 300},
			"empty":  {NA: 0, NB: 500, Keys: 100},
			"spills": {NA: 20_000, NB: 15_000, Keys: 2000, Pad: 24},
			// 4 keys: a key of the build side is ~2500 records of
			// ~230 bytes, over the 512 KiB of a slot (swapped below
			// for the first input as build side). The probe side's 40
			// records alone would not spill.
			"hotKeys": {NA: 40, NB: 10_000, Keys: 4, Pad: 200},
		} {
			t.Run(fmt.Sprintf("%v/%s", hint, name), func(t *testing.T) {
				spec.Hint = hint
				if name == "hotKeys" && hint == stream.RepartitionHashFirst {
					spec.NA, spec.NB = spec.NB, spec.NA
				}
				dir := t.TempDir()
				m := runtime.NewLocalMetrics()
				runJoinSuite(t, spec, stream.WithParallelism(2), stream.WithManagedMemory(1<<20), stream.WithTmpDirs(dir), stream.WithMetrics(m))
				var spilled float64
				for name, v := range m.Snapshot() {
					if strings.Contains(name, "Join") && strings.HasSuffix(name, ".numSpilledBytes") {
						spilled += v
					}
				}
				if name == "spills" || name == "hotKeys" {
					if spilled == 0 {
						t.Fatalf("no join spilled under a 1 MiB budget: %v", m.Snapshot())
					}
				}
				if left := spillFiles(t, dir); len(left) != 0 {
					t.Fatalf("spill files left after the job: %v", left)
				}
				// The task read the build input first: no probe record
				// waited for it.
				for name, v := range m.Snapshot() {
					if strings.HasSuffix(name, ".numEarlyProbeRecords") && v != 0 {
						t.Fatalf("%s = %v: probe records arrived before the build side ended", name, v)
					}
				}
			})
		}
	}
}

func TestJoinHintNames(t *testing.T) {
	if got := stream.RepartitionHashFirst.String(); got != "REPARTITION_HASH_FIRST" {
		t.Fatalf("RepartitionHashFirst is %q", got)
	}
}

// The aggregation suite (what the cluster test runs) against its
// reference under a budget that spills.
func TestAggregationSuiteLocal(t *testing.T) {
	spec := joinsuite.Spec{NA: 30_000, Keys: 20_000, Pad: 24}
	env := stream.NewEnvironment(stream.WithRuntimeMode(stream.Batch), stream.WithParallelism(3), stream.WithManagedMemory(1<<20))
	res := joinsuite.BuildAggregation(env, spec).Collect()
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := res.Values()
	sort.Strings(got)
	if want := joinsuite.ExpectedAggregation(spec); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%d lines, want %d: %s", len(got), len(want), firstLineDiff(got, want))
	}
}

func firstLineDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("line %d: %q, want %q", i, got[i], want[i])
		}
	}
	return "one is a prefix of the other"
}
