package stream

import (
	"slices"
	"testing"

	"github.com/gofl/gofl/stream/codec"
	"github.com/gofl/gofl/stream/runtime"
)

// Probe records that arrive before the build side ended (an executor
// that does not select inputs) wait in a sorter and join once it ends;
// they are counted in numEarlyProbeRecords.
func TestHashJoinProbeBeforeBuildEnded(t *testing.T) {
	iom := runtime.NewIOManager([]string{t.TempDir()})
	defer func() { _ = iom.Close() }()
	mem := runtime.NewMemoryManager(1 << 20)
	out := &collectOutput{}
	m := runtime.NewLocalMetrics()
	kc, _ := codec.For[string]()
	ac, _ := codec.For[combKV]()
	op := &hashJoinOp[combKV, combKV, string, string]{kind: leftOuterJoin, build: 1,
		joinCodecs: joinCodecs[combKV, combKV, string]{ka: func(v combKV) string { return v.K }, kb: func(v combKV) string { return v.K }, kc: kc, ac: ac, bc: ac},
		fns: &joinFns[combKV, combKV, string, string]{left: func(a, b combKV, ok bool) string {
			if !ok {
				return a.K + "-"
			}
			return a.K + "+" + b.K
		}}}
	if err := op.Open(&runtime.Context{OperatorName: "J", Output: out, Metrics: m, Batch: runtime.BatchMemory{Memory: mem, IO: iom}}); err != nil {
		t.Fatal(err)
	}
	if op.SelectedInput() != 1 {
		t.Fatalf("selected input %d before the build side ended, want 1", op.SelectedInput())
	}
	for _, k := range []string{"a", "b", "c"} {
		if err := op.ProcessElement(0, runtime.Record{Value: combKV{K: k}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"b", "c", "c", "d"} {
		if err := op.ProcessElement(1, runtime.Record{Value: combKV{K: k}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := op.EndInput(1); err != nil {
		t.Fatal(err)
	}
	if op.SelectedInput() != -1 {
		t.Fatalf("selected input %d after the build side ended, want -1 (any)", op.SelectedInput())
	}
	if err := op.ProcessElement(0, runtime.Record{Value: combKV{K: "d"}}); err != nil {
		t.Fatal(err)
	}
	if err := op.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := op.Close(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range out.recs {
		got = append(got, r.Value.(string))
	}
	slices.Sort(got)
	if want := []string{"a-", "b+b", "c+c", "c+c", "d+d"}; !slices.Equal(got, want) {
		t.Fatalf("results %v, want %v", got, want)
	}
	if n := m.Snapshot()["numEarlyProbeRecords"]; n != 3 {
		t.Fatalf("numEarlyProbeRecords = %v, want 3", n)
	}
	if mem.Used() != 0 {
		t.Fatalf("%d bytes reserved after Close", mem.Used())
	}
}
