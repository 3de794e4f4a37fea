package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// heapMinimum is the Go runtime's heap goal floor at GOGC=100 (its
// defaultHeapMinimum); the runtime scales it with the GC percent, so a
// percent past floor/heapMinimum*100 would raise the goal beyond floor.
const heapMinimum = 4 << 20

// maxPercent bounds the GC percent Set may choose, whatever the floor.
const maxPercent = 10_000

// liveMetric is the heap the last GC cycle marked live.
const liveMetric = "/gc/heap/live:bytes"

// Set keeps the heap goal at floor bytes or more until the returned stop
// is called, which restores the GC percent it found. After every GC cycle
// it raises the GC percent so that live heap plus growth reaches floor, and
// never lowers it below the percent it found: a live heap past floor/2 is
// paced as before. A memory limit (GOMEMLIMIT) still applies. Set does
// nothing when GOGC is set in the environment (the user chose) or the GC
// is off. Not for concurrent use: one floor per process.
func Set(floor int64) (stop func()) {
	if os.Getenv("GOGC") != "" || floor <= 0 {
		return func() {}
	}
	base := debug.SetGCPercent(100)
	debug.SetGCPercent(base)
	if base < 0 {
		return func() {}
	}
	f := &tuner{floor: floor, base: base, sample: []metrics.Sample{{Name: liveMetric}}}
	f.afterGC()
	return f.stop
}

// tuner re-computes the GC percent after each cycle: a cleanup on an
// unreachable sentinel runs once per cycle (on the runtime's cleanup
// goroutine) and arms the next one.
type tuner struct {
	floor int64
	base  int

	mu      sync.Mutex
	stopped bool
	sample  []metrics.Sample
}

// sentinel holds a pointer so that it is not a tiny allocation (whose
// cleanups may be batched with other objects').
type sentinel struct {
	_ *int
	_ [16]byte
}

func (f *tuner) afterGC() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	debug.SetGCPercent(f.percent())
	runtime.AddCleanup(new(sentinel), (*tuner).afterGC, f)
}

// percent is the GC percent for the last cycle's live heap.
func (f *tuner) percent() int {
	metrics.Read(f.sample)
	live := int64(0)
	if f.sample[0].Value.Kind() == metrics.KindUint64 {
		live = int64(f.sample[0].Value.Uint64())
	}
	return percentFor(f.floor, f.base, live)
}

// percentFor is the GC percent whose heap goal is floor for a live heap
// of live bytes, within [base, min(maxPercent, floor/heapMinimum*100)]
// (the cap alone when no cycle measured the live heap yet).
func percentFor(floor int64, base int, live int64) int {
	p := maxPercent
	if live > 0 {
		p = int(max(floor-live, 0) * 100 / live)
	}
	return max(base, min(p, maxPercent, int(floor*100/heapMinimum)))
}

func (f *tuner) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.stopped {
		f.stopped = true
		debug.SetGCPercent(f.base)
	}
}
