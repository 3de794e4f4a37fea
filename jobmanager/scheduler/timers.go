package scheduler

import (
	"container/heap"
	"time"
)

type timerKind int

const (
	timerBulk timerKind = iota
	timerRestart
	timerIdleSlot
)

type timer struct {
	at   time.Duration
	seq  uint64
	kind timerKind
	ref  any
	gen  uint64
}

// timerQueue orders timers by due time, then by creation, so firing order
// is deterministic.
type timerQueue struct {
	h   timerHeap
	seq uint64
}

type timerHeap []timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || (h[i].at == h[j].at && h[i].seq < h[j].seq)
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)   { *h = append(*h, x.(timer)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}

func (q *timerQueue) add(at time.Duration, kind timerKind, ref any) {
	q.addGen(at, kind, ref, 0)
}

func (q *timerQueue) addGen(at time.Duration, kind timerKind, ref any, gen uint64) {
	q.seq++
	heap.Push(&q.h, timer{at: at, seq: q.seq, kind: kind, ref: ref, gen: gen})
}

func (q *timerQueue) next() (time.Duration, bool) {
	if len(q.h) == 0 {
		return 0, false
	}
	return q.h[0].at, true
}

func (q *timerQueue) popDue(now time.Duration) (timer, bool) {
	if len(q.h) == 0 || q.h[0].at > now {
		return timer{}, false
	}
	return heap.Pop(&q.h).(timer), true
}

func (q *timerQueue) clear() { q.h = nil }

func (s *Scheduler) fireTimers() {
	for {
		t, ok := s.timers.popDue(s.now)
		if !ok {
			return
		}
		switch t.kind {
		case timerBulk:
			s.deployer.checkBulk(t.ref.(*bulk))
		case timerRestart:
			s.deployer.restartDue(t.ref.(*pendingRestart))
		case timerIdleSlot:
			s.pool.idleTimeout(t.ref.(*poolSlot), t.gen)
		}
	}
}
