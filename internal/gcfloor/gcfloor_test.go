package gcfloor

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name  string
		floor int64
		base  int
		live  int64
		want  int
	}{
		{"small live heap: goal at the floor", 64 * mib, 100, 4 * mib, 1500},
		{"tiny live heap: capped by the scaled heap minimum", 64 * mib, 100, mib / 2, 1600},
		{"live heap past half the floor: the base percent", 64 * mib, 100, 40 * mib, 100},
		{"live heap past the floor: the base percent", 64 * mib, 100, 200 * mib, 100},
		{"a higher base is kept", 64 * mib, 300, 20 * mib, 300},
		{"no cycle yet: the cap", 64 * mib, 100, 0, 1600},
		{"huge floor: maxPercent", 1 << 40, 100, mib, maxPercent},
	} {
		if got := percentFor(c.floor, c.base, c.live); got != c.want {
			t.Errorf("%s: percentFor(%d, %d, %d) = %d, want %d", c.name, c.floor, c.base, c.live, got, c.want)
		}
	}
}

// readUint reads one uint64 runtime metric.
func readUint(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// waitPercent runs GC cycles until the GC percent satisfies ok (the tuner
// runs on the runtime's cleanup goroutine after a cycle: there is no event
// to wait on).
func waitPercent(t *testing.T, ok func(p uint64) bool) uint64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p := readUint("/gc/gogc:percent")
		if ok(p) {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("GC percent still %d after 10s", p)
		}
		runtime.GC()
		runtime.Gosched()
	}
}

func TestSetRaisesTheGoalToTheFloorAndStopRestores(t *testing.T) {
	t.Setenv("GOGC", "") // as if unset
	const floor = 256 << 20
	before := readUint("/gc/gogc:percent")
	stop := Set(floor)
	waitPercent(t, func(p uint64) bool { return p > before })
	runtime.GC()
	if goal := readUint("/gc/heap/goal:bytes"); goal < floor*9/10 {
		t.Errorf("heap goal %d MiB with a floor of %d MiB", goal>>20, floor>>20)
	}
	stop()
	if p := readUint("/gc/gogc:percent"); p != before {
		t.Errorf("GC percent %d after stop, want %d as before", p, before)
	}
	// Later cycles leave it alone.
	runtime.GC()
	runtime.GC()
	if p := readUint("/gc/gogc:percent"); p != before {
		t.Errorf("GC percent %d cycles after stop, want %d", p, before)
	}
}

func TestSetLeavesALargeLiveHeapAtTheBasePercent(t *testing.T) {
	t.Setenv("GOGC", "")
	const floor = 8 << 20
	live := make([]*[1 << 20]byte, 16) // 16 MiB live: past the floor
	for i := range live {
		live[i] = new([1 << 20]byte)
	}
	before := readUint("/gc/gogc:percent")
	stop := Set(floor)
	defer stop()
	for range 3 {
		runtime.GC()
	}
	if p := readUint("/gc/gogc:percent"); p != before {
		t.Errorf("GC percent %d with a live heap past the floor, want %d", p, before)
	}
	runtime.KeepAlive(live)
	live = nil // the live heap drops under the floor: the tuner raises the percent
	waitPercent(t, func(p uint64) bool { return p > before })
}

func TestSetRespectsGOGC(t *testing.T) {
	t.Setenv("GOGC", "100")
	before := readUint("/gc/gogc:percent")
	stop := Set(1 << 30)
	defer stop()
	runtime.GC()
	runtime.GC()
	if p := readUint("/gc/gogc:percent"); p != before {
		t.Errorf("GC percent %d with GOGC set, want %d", p, before)
	}
}
