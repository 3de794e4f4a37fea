package scheduler

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	eg "github.com/gofl/gofl/jobmanager/executiongraph"
)

// poolOf builds a pool from "tm:total:used" specs; the free slots of a TM are
// TM/used .. TM/total-1.
func poolOf(specs ...[3]any) *slotPool {
	p := &slotPool{slots: map[eg.AllocationID]*poolSlot{}, tms: map[string]*tmSlots{}}
	for i, sp := range specs {
		id, total, used := sp[0].(string), sp[1].(int), sp[2].(int)
		// tm-x runs on host x.host.
		tm := &tmSlots{loc: eg.TaskManagerLocation{ID: id, Host: strings.TrimPrefix(id, "tm-") + ".host"}, order: i, withFree: -1}
		p.tms[id] = tm
		for s := 0; s < total; s++ {
			slot := &poolSlot{id: eg.AllocationID(fmt.Sprintf("%s/%d", id, s)), tm: tm, freeIndex: -1}
			p.slots[slot.id] = slot
			tm.slots = append(tm.slots, slot)
			if s < used {
				slot.owner = &sharedSlot{}
				continue
			}
			slot.freeIndex = len(tm.free)
			tm.free = append(tm.free, slot)
			if tm.withFree < 0 {
				tm.withFree = len(p.withFree)
				p.withFree = append(p.withFree, tm)
			}
		}
	}
	return p
}

func TestSlotSelection(t *testing.T) {
	cluster := func() *slotPool {
		// tm-a: 3 of 4 used, tm-b: 1 of 2 used, tm-c: 0 of 4 used.
		return poolOf([3]any{"tm-a", 4, 3}, [3]any{"tm-b", 2, 1}, [3]any{"tm-c", 4, 0})
	}
	tests := []struct {
		name   string
		cfg    Config
		prof   slotProfile
		wantTM string
		want   eg.AllocationID // exact slot, when it matters
	}{
		{name: "locality: TM hosting most inputs", prof: slotProfile{preferred: map[string]int{"tm-a": 1, "tm-b": 3}}, wantTM: "tm-b"},
		{name: "locality: preferred TM without free slot is skipped", prof: slotProfile{preferred: map[string]int{"tm-x": 5, "tm-a": 1}}, wantTM: "tm-a"},
		{name: "locality: equal weights go to the older TM", prof: slotProfile{preferred: map[string]int{"tm-c": 2, "tm-b": 2}}, wantTM: "tm-b"},
		{name: "evenly: least utilized TM", cfg: Config{EvenlySpreadOut: true}, wantTM: "tm-c"},
		{name: "evenly: locality first", cfg: Config{EvenlySpreadOut: true}, prof: slotProfile{preferred: map[string]int{"tm-a": 1}}, wantTM: "tm-a"},
		{name: "evenly: equal weights go to the less utilized TM", cfg: Config{EvenlySpreadOut: true}, prof: slotProfile{preferred: map[string]int{"tm-a": 2, "tm-b": 2}}, wantTM: "tm-b"},
		{name: "hosts: a TM on the first preferred host", prof: slotProfile{hosts: []string{"c.host", "b.host"}}, wantTM: "tm-c"},
		{name: "hosts: a host without TaskManager is skipped", prof: slotProfile{hosts: []string{"x.host", "b.host"}}, wantTM: "tm-b"},
		{name: "hosts: inputs' TaskManager first", prof: slotProfile{preferred: map[string]int{"tm-a": 1}, hosts: []string{"c.host"}}, wantTM: "tm-a"},
		{name: "evenly: preferred host first", cfg: Config{EvenlySpreadOut: true}, prof: slotProfile{hosts: []string{"a.host"}}, wantTM: "tm-a"},
		{name: "previous allocation when free", cfg: Config{LocalRecovery: true}, prof: slotProfile{previous: []eg.AllocationID{"tm-a/3"}}, want: "tm-a/3"},
		{name: "previous allocation taken: falls back to locality", cfg: Config{LocalRecovery: true},
			prof: slotProfile{previous: []eg.AllocationID{"tm-a/0"}, preferred: map[string]int{"tm-b": 1}}, wantTM: "tm-b"},
		{name: "previous allocation gone: falls back to evenly", cfg: Config{LocalRecovery: true, EvenlySpreadOut: true},
			prof: slotProfile{previous: []eg.AllocationID{"tm-z/0"}}, wantTM: "tm-c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := cluster()
			slot := newSlotSelection(tt.cfg).selectSlot(p, &tt.prof)
			if slot == nil || slot.owner != nil {
				t.Fatalf("selected %+v, want a free slot", slot)
			}
			if tt.wantTM != "" && slot.tm.loc.ID != tt.wantTM {
				t.Errorf("selected %s, want a slot on %s", slot.id, tt.wantTM)
			}
			if tt.want != "" && slot.id != tt.want {
				t.Errorf("selected %s, want %s", slot.id, tt.want)
			}
		})
	}
}

// Evenly-spread-out placement over several picks keeps TaskManagers balanced.
func TestEvenlySpreadOutBalances(t *testing.T) {
	p := poolOf([3]any{"tm-a", 3, 0}, [3]any{"tm-b", 3, 0}, [3]any{"tm-c", 3, 0})
	sel := newSlotSelection(Config{EvenlySpreadOut: true})
	count := map[string]int{}
	for i := 0; i < 6; i++ {
		slot := sel.selectSlot(p, &slotProfile{})
		p.takeFree(slot)
		slot.owner = &sharedSlot{}
		count[slot.tm.loc.ID]++
	}
	for _, tm := range []string{"tm-a", "tm-b", "tm-c"} {
		if count[tm] != 2 {
			t.Fatalf("placement %v, want 2 slots on every TaskManager", count)
		}
	}
}

// A host preference names no TaskManager with a free slot: any free slot
// is taken (the fallback), with either strategy.
func TestHostPreferenceFallsBackToAnySlot(t *testing.T) {
	for _, cfg := range []Config{{}, {EvenlySpreadOut: true}} {
		p := poolOf([3]any{"tm-a", 2, 2}, [3]any{"tm-b", 2, 0})
		slot := newSlotSelection(cfg).selectSlot(p, &slotProfile{hosts: []string{"a.host", "z.host"}})
		if slot == nil || slot.owner != nil || slot.tm.loc.ID != "tm-b" {
			t.Errorf("%+v: selected %+v, want tm-b's free slot", cfg, slot)
		}
	}
}

// Hosts rank by the bytes they hold; subtask i starts from the host
// ranked i mod n, so readers spread over the data's hosts, and a TM on the
// subtask's own host wins over one on a host ranked higher.
func TestSubtasksSpreadOverPreferredHosts(t *testing.T) {
	ranked := rankHosts(map[string]int64{"h2.host": 30, "h1.host": 50, "h3.host": 30})
	if want := []string{"h1.host", "h2.host", "h3.host"}; !slices.Equal(ranked, want) {
		t.Fatalf("ranked %v, want %v", ranked, want)
	}
	for sub, want := range [][]string{{"h1.host", "h2.host", "h3.host"}, {"h2.host", "h3.host", "h1.host"}, {"h3.host", "h1.host", "h2.host"}, {"h1.host", "h2.host", "h3.host"}} {
		if got := subtaskHosts(ranked, sub); !slices.Equal(got, want) {
			t.Errorf("subtask %d prefers %v, want %v", sub, got, want)
		}
	}
	p := poolOf([3]any{"tm-h1", 2, 0}, [3]any{"tm-h2", 2, 0}, [3]any{"tm-h3", 2, 0})
	var got []string
	for sub := range 3 {
		slot := newSlotSelection(Config{}).selectSlot(p, &slotProfile{hosts: subtaskHosts(ranked, sub)})
		got = append(got, slot.tm.loc.ID)
	}
	if want := []string{"tm-h1", "tm-h2", "tm-h3"}; !slices.Equal(got, want) {
		t.Errorf("subtasks 0..2 placed on %v, want %v", got, want)
	}
}

// An offered slot goes to the oldest pending request that prefers its
// TaskManager or has its host first, else to the oldest request.
func TestOfferedSlotGoesToTheRequestPreferringIt(t *testing.T) {
	r1 := &sharedSlot{pending: true, profile: slotProfile{hosts: []string{"h1", "h2"}}}
	r2 := &sharedSlot{pending: true, profile: slotProfile{hosts: []string{"h2", "h1"}}}
	r3 := &sharedSlot{pending: true, profile: slotProfile{preferred: map[string]int{"tm-3": 1}}}
	withdrawn := &sharedSlot{profile: slotProfile{hosts: []string{"h2"}}}
	p := &slotPool{pending: []*sharedSlot{r1, withdrawn, r2, r3}, queued: 3}
	for _, c := range []struct {
		loc  eg.TaskManagerLocation
		want *sharedSlot
		name string
	}{
		{eg.TaskManagerLocation{ID: "tm-2", Host: "h2"}, r2, "r2 (h2 first)"},
		{eg.TaskManagerLocation{ID: "tm-3", Host: "h9"}, r3, "r3 (its inputs on tm-3)"},
		{eg.TaskManagerLocation{ID: "tm-9", Host: "h9"}, r1, "r1 (the oldest)"},
		{eg.TaskManagerLocation{ID: "tm-1", Host: "h1"}, nil, "none"},
	} {
		if got := p.popPendingFor(c.loc); got != c.want {
			t.Errorf("a slot of %+v went to %p, want %s", c.loc, got, c.name)
		}
	}
	if p.queued != 0 {
		t.Errorf("%d requests still queued, want 0", p.queued)
	}
}
