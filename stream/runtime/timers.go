package runtime

import "container/heap"

// Timer is a keyed timer: it fires for Key (set as the backend's current
// key) with a Namespace (a window, or nil) at Timestamp.
type Timer struct {
	Key       any
	Namespace any
	Timestamp int64
}

// TimerService holds an operator's keyed event-time and processing-time
// timers (Flink's InternalTimerService). A timer registered twice fires once.
type TimerService struct {
	ctx     *Context
	backend *KeyedStateBackend
	event   timerHeap
	proc    timerHeap
	onEvent func(Timer) error
	onProc  func(Timer) error
	wm      int64
}

// NewTimerService returns a timer service calling onEvent and onProc with
// the timer's key set as the backend's current key.
func NewTimerService(ctx *Context, backend *KeyedStateBackend, onEvent, onProc func(Timer) error) *TimerService {
	return &TimerService{
		ctx: ctx, backend: backend, onEvent: onEvent, onProc: onProc, wm: MinWatermark,
		event: timerHeap{set: map[Timer]bool{}}, proc: timerHeap{set: map[Timer]bool{}},
	}
}

// CurrentWatermark is the last watermark passed to AdvanceWatermark.
func (s *TimerService) CurrentWatermark() int64 { return s.wm }

// RegisterEventTimeTimer fires at the first watermark >= ts.
func (s *TimerService) RegisterEventTimeTimer(key, ns any, ts int64) {
	s.event.add(Timer{Key: key, Namespace: ns, Timestamp: ts})
}

// DeleteEventTimeTimer removes a pending event-time timer.
func (s *TimerService) DeleteEventTimeTimer(key, ns any, ts int64) {
	s.event.remove(Timer{Key: key, Namespace: ns, Timestamp: ts})
}

// RegisterProcessingTimeTimer fires once the clock reaches ts.
func (s *TimerService) RegisterProcessingTimeTimer(key, ns any, ts int64) {
	t := Timer{Key: key, Namespace: ns, Timestamp: ts}
	if s.proc.set[t] {
		return
	}
	s.proc.add(t)
	s.ctx.RegisterProcessingTimer(ts, s.fireProcessing)
}

// DeleteProcessingTimeTimer removes a pending processing-time timer.
func (s *TimerService) DeleteProcessingTimeTimer(key, ns any, ts int64) {
	s.proc.remove(Timer{Key: key, Namespace: ns, Timestamp: ts})
}

// AdvanceWatermark fires every event-time timer at or below wm, in
// timestamp order. It does not forward the watermark.
func (s *TimerService) AdvanceWatermark(wm int64) error {
	s.wm = wm
	for len(s.event.items) > 0 && s.event.items[0].Timestamp <= wm {
		t := s.event.pop()
		s.backend.SetCurrentKey(t.Key)
		if err := s.onEvent(t); err != nil {
			return err
		}
	}
	return nil
}

func (s *TimerService) fireProcessing(now int64) error {
	for len(s.proc.items) > 0 && s.proc.items[0].Timestamp <= now {
		t := s.proc.pop()
		s.backend.SetCurrentKey(t.Key)
		if err := s.onProc(t); err != nil {
			return err
		}
	}
	return nil
}

type timerHeap struct {
	items []Timer
	set   map[Timer]bool
}

func (h *timerHeap) add(t Timer) {
	if h.set[t] {
		return
	}
	h.set[t] = true
	heap.Push((*timerSlice)(&h.items), t)
}

func (h *timerHeap) pop() Timer {
	t := heap.Pop((*timerSlice)(&h.items)).(Timer)
	delete(h.set, t)
	return t
}

func (h *timerHeap) remove(t Timer) {
	if !h.set[t] {
		return
	}
	delete(h.set, t)
	for i := range h.items {
		if h.items[i] == t {
			heap.Remove((*timerSlice)(&h.items), i)
			return
		}
	}
}

type timerSlice []Timer

func (s timerSlice) Len() int           { return len(s) }
func (s timerSlice) Less(i, j int) bool { return s[i].Timestamp < s[j].Timestamp }
func (s timerSlice) Swap(i, j int)      { s[i], s[j] = s[j], s[i] }
func (s *timerSlice) Push(x any)        { *s = append(*s, x.(Timer)) }
func (s *timerSlice) Pop() any {
	old := *s
	t := old[len(old)-1]
	*s = old[:len(old)-1]
	return t
}

// procTimer is a task-level processing-time callback.
type procTimer struct {
	ts  int64
	seq uint64
	op  int
	fn  func(int64) error
}

type procQueue struct {
	items []procTimer
	seq   uint64
}

func (q *procQueue) Len() int { return len(q.items) }
func (q *procQueue) Less(i, j int) bool {
	if q.items[i].ts != q.items[j].ts {
		return q.items[i].ts < q.items[j].ts
	}
	return q.items[i].seq < q.items[j].seq
}
func (q *procQueue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *procQueue) Push(x any)    { q.items = append(q.items, x.(procTimer)) }
func (q *procQueue) Pop() any {
	t := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return t
}

func (q *procQueue) push(t procTimer) {
	q.seq++
	t.seq = q.seq
	heap.Push(q, t)
}
