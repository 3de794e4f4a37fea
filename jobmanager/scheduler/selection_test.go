package scheduler

import (
	"fmt"
	"testing"

	eg "github.com/gofl/gofl/jobmanager/executiongraph"
)

// poolOf builds a pool from "tm:total:used" specs; the free slots of a TM are
// TM/used .. TM/total-1.
func poolOf(specs ...[3]any) *slotPool {
	p := &slotPool{slots: map[eg.AllocationID]*poolSlot{}, tms: map[string]*tmSlots{}}
	for i, sp := range specs {
		id, total, used := sp[0].(string), sp[1].(int), sp[2].(int)
		tm := &tmSlots{loc: eg.TaskManagerLocation{ID: id}, order: i, withFree: -1}
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
