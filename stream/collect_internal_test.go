package stream

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/gofl/gofl/stream/runtime"
)

type pair struct {
	Word  string
	Count int64
}

// collectThrough runs the cluster path of a Collect sink's operator over
// values, one operator per subtask, and returns the accumulator the
// subtasks' lists concatenate to, as the JobMaster does.
func collectThrough[T any](t testing.TB, c *Collected[T], subtasks ...[]T) []byte {
	t.Helper()
	var all []byte
	for i, vs := range subtasks {
		op := &collectOp[T]{c: c}
		var got []byte
		ctx := &runtime.Context{OperatorID: "op", SubtaskIndex: i, Accumulate: func(name string, v []byte) {
			if name != "op" {
				t.Fatalf("accumulator named %q, want the operator ID", name)
			}
			got = append(got, v...)
		}}
		if err := op.Open(ctx); err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			if err := op.ProcessElement(0, runtime.Record{Value: v}); err != nil {
				t.Fatal(err)
			}
		}
		if err := op.Finish(); err != nil {
			t.Fatal(err)
		}
		if err := op.Close(); err != nil {
			t.Fatal(err)
		}
		all = append(all, got...)
	}
	return all
}

func TestCollectedRoundTripsThroughAnAccumulator(t *testing.T) {
	env := NewEnvironment()
	c := FromElements(env, pair{}).Collect()
	a := []pair{{"straße", 2}, {"", 0}, {"日本語", -7}}
	b := []pair{{"x", 1 << 40}}
	acc := collectThrough(t, c, a, nil, b)
	if err := c.fromAccumulator(acc); err != nil {
		t.Fatal(err)
	}
	if got, want := c.Values(), append(append([]pair{}, a...), b...); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if n, err := CountCollected(acc); err != nil || n != 4 {
		t.Fatalf("CountCollected = %d, %v", n, err)
	}
	// An empty result is no records, not an error.
	if err := c.fromAccumulator(nil); err != nil || len(c.Values()) != 0 {
		t.Fatalf("empty: %v, %v", c.Values(), err)
	}
}

func FuzzCollectedDecode(f *testing.F) {
	env := NewEnvironment()
	c := FromElements(env, pair{}).Collect()
	f.Add(collectThrough(f, c, []pair{{"a", 1}, {"bc", 2}}))
	f.Add([]byte{3, 1, 'a', 2})
	f.Add([]byte{0x80, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		// Hostile bytes from the network: an error or records, never a panic.
		if err := c.fromAccumulator(bytes.Clone(b)); err != nil {
			return
		}
		if n, err := CountCollected(b); err != nil || n != len(c.Values()) {
			t.Fatalf("decoded %d records, CountCollected %d, %v", len(c.Values()), n, err)
		}
	})
}
