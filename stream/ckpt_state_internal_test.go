package stream

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/stream/runtime"
)

// Every keyed state type survives a snapshot and restore, also rescaled.
func TestCheckpointKeyedStateTypes(t *testing.T) {
	env := NewEnvironment()
	list := NewListState[int]("list")
	m := NewMapState[int, string]("map")
	red := NewReducingState("max", func(a, b int) int { return max(a, b) })
	agg := NewAggregatingState[int]("avg", NewAggregator(
		func() [2]int { return [2]int{} },
		func(v int, a [2]int) [2]int { return [2]int{a[0] + v, a[1] + 1} },
		func(a [2]int) string { return fmt.Sprintf("%d/%d", a[0], a[1]) }))
	op := opOf(KeyedProcess(KeyBy(FromElements(env, kv{}), func(x kv) string { return x.K }), KeyedProcessFunction[string, kv, string]{
		ProcessElement: func(ctx *KeyedContext[string], v kv, out Collector[string]) error {
			list.Add(ctx, v.V)
			if v.V%3 == 0 {
				list.Update(ctx, list.Get(ctx)[1:])
			}
			m.Put(ctx, v.V%4, fmt.Sprint(v.V))
			if v.V%5 == 0 {
				m.Remove(ctx, (v.V+1)%4)
			}
			red.Add(ctx, v.V*7%11)
			agg.Add(ctx, v.V)
			mx, _ := red.Get(ctx)
			avg, _ := agg.Get(ctx)
			keys := m.Keys(ctx)
			sort.Ints(keys)
			out.Collect(fmt.Sprintf("%s list=%v keys=%v has2=%v max=%d avg=%s empty=%v", v.K, list.Get(ctx), keys, m.Contains(ctx, 2), mx, avg, m.IsEmpty(ctx)))
			if v.V%13 == 0 {
				list.Clear(ctx)
				m.Clear(ctx)
				red.Clear(ctx)
				agg.Clear(ctx)
			}
			return nil
		},
	}))
	forEachRescale(t, func(t *testing.T, p1, p2 int) {
		checkRestore(t, op, 1, kvSteps(0, 40), kvSteps(40, 80), p1, p2)
	})
}

type cmd struct {
	Op string
	V  int
}

// ttlProbe runs a keyed process whose records put ("put") or read ("get")
// a value, a list element and a map entry with a TTL of one second.
func ttlProbe(t *testing.T, cfg StateTtlConfig, script []step) []string {
	t.Helper()
	env := NewEnvironment()
	v := NewValueState[int]("v", WithTTL(cfg))
	l := NewListState[int]("l", WithTTL(cfg))
	m := NewMapState[string, int]("m", WithTTL(cfg))
	op := opOf(KeyedProcess(KeyBy(FromElements(env, cmd{}), func(cmd) string { return "k" }), KeyedProcessFunction[string, cmd, string]{
		ProcessElement: func(ctx *KeyedContext[string], c cmd, out Collector[string]) error {
			if c.Op == "put" {
				v.Update(ctx, c.V)
				l.Add(ctx, c.V)
				m.Put(ctx, "x", c.V)
				return nil
			}
			x, ok := v.Value(ctx)
			y, _ := m.Get(ctx, "x")
			out.Collect(fmt.Sprintf("%d:%v/%v/%v", ctx.ProcessingTime(), ok && x > 0, l.Get(ctx), y))
			return nil
		},
	}))
	out, _ := runSteps(t, op, 1, 1, 128, nil, script, 0, 0)
	var got []string
	for _, r := range out {
		got = append(got, r.Value.(string))
	}
	return got
}

func TestStateTTL(t *testing.T) {
	script := []step{
		clockStep(1000), rec("k", cmd{"put", 1}),
		clockStep(1500), rec("k", cmd{"get", 0}),
		clockStep(1800), rec("k", cmd{"put", 2}), // renews the value and the map entry, adds a list element
		clockStep(2300), rec("k", cmd{"get", 0}), // 1.3s after the first put, 0.5s after the second
		clockStep(3100), rec("k", cmd{"get", 0}),
	}
	cases := []struct {
		name string
		cfg  StateTtlConfig
		want string
	}{
		{"write", StateTtlConfig{TTL: time.Second},
			"1500:true/[1]/1 2300:true/[2]/2 3100:false/[]/0"},
		// Each read renews what it sees, so nothing expires between reads.
		{"read-and-write", StateTtlConfig{TTL: time.Second, UpdateType: OnReadAndWrite},
			"1500:true/[1]/1 2300:true/[1 2]/2 3100:true/[1 2]/2"},
		{"return-expired", StateTtlConfig{TTL: time.Second, Visibility: ReturnExpiredIfNotCleanedUp},
			"1500:true/[1]/1 2300:true/[1 2]/2 3100:true/[1 2]/2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := strings.Join(ttlProbe(t, c.cfg, script), " ")
			if got != c.want {
				t.Fatalf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

// A TTL is part of the state's type: adding one to a checkpointed state
// fails the restore clearly.
func TestStateTTLIncompatible(t *testing.T) {
	env := NewEnvironment()
	ks := KeyBy(FromElements(env, kv{}), func(x kv) string { return x.K })
	plain := NewValueState[int]("s")
	withTTL := NewValueState[int]("s", WithTTL(StateTtlConfig{TTL: time.Second}))
	mk := func(s ValueState[int]) func() runtime.Operator {
		return opOf(KeyedProcess(ks, KeyedProcessFunction[string, kv, int]{ProcessElement: func(ctx *KeyedContext[string], v kv, out Collector[int]) error {
			s.Update(ctx, v.V)
			return nil
		}}))
	}
	_, snaps := runSteps(t, mk(plain), 1, 1, 128, nil, kvSteps(0, 3), 0, 1)
	h := startHarness(t, mk(withTTL), 1, 0, 1, 128, redistribute(snaps, 1, 128)[0], 0)
	h.send(0, kv{"k1", 1})
	if err := h.waitErr(); err == nil || !strings.Contains(err.Error(), "incompatible state type") {
		t.Fatalf("got %v", err)
	}
}
