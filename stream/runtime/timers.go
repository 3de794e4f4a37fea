package runtime

import (
	"container/heap"
	"encoding/binary"
	"fmt"
	"sort"
)

// Timer is a keyed timer: it fires for Key (set as the backend's current
// key) with a Namespace (a window, or nil) at Timestamp.
type Timer struct {
	Key       any
	Namespace any
	Timestamp int64
}

// TimerService holds an operator's keyed event-time and processing-time
// timers (Flink's InternalTimerService). A timer registered twice fires once.
//
// A snapshot writes the timers as keyed section "timers:<name>" per key
// group of the timer's key, so they follow their keys when rescaled. It is
// serialized synchronously (timers are few next to the keyed state).
type TimerService struct {
	name    string
	ctx     *Context
	backend *KeyedStateBackend
	event   timerHeap
	proc    timerHeap
	onEvent func(Timer) error
	onProc  func(Timer) error
	wm      int64
}

// DefaultTimerServiceName is the name of a TimerService made by
// NewTimerService (Flink's "user-timers").
const DefaultTimerServiceName = "user-timers"

// NewTimerService returns a timer service named DefaultTimerServiceName
// calling onEvent and onProc with the timer's key set as the backend's
// current key.
func NewTimerService(ctx *Context, backend *KeyedStateBackend, onEvent, onProc func(Timer) error) *TimerService {
	return NewNamedTimerService(DefaultTimerServiceName, ctx, backend, onEvent, onProc)
}

// NewNamedTimerService is NewTimerService with a name, which tells the
// snapshots of several timer services of one operator apart.
func NewNamedTimerService(name string, ctx *Context, backend *KeyedStateBackend, onEvent, onProc func(Timer) error) *TimerService {
	return &TimerService{
		name: name, ctx: ctx, backend: backend, onEvent: onEvent, onProc: onProc, wm: MinWatermark,
		event: timerHeap{set: map[Timer]bool{}}, proc: timerHeap{set: map[Timer]bool{}},
	}
}

// Name is the service's name.
func (s *TimerService) Name() string { return s.name }

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

// Timer kinds in a snapshot.
const (
	timerEvent byte = iota
	timerProcessing
)

func timersTypeName(keyCodec, nsCodec Codec) string {
	ns := "nil"
	if nsCodec != nil {
		ns = nsCodec.TypeName()
	}
	return "timers(" + keyCodec.TypeName() + "," + ns + ")"
}

// Snapshot writes the pending event-time and processing-time timers into
// snap as section "timers:<name>" per key group, keys encoded with
// keyCodec and namespaces with nsCodec (nil when every namespace is nil).
// Each entry is the key, then the kind, the timestamp and the namespace.
func (s *TimerService) Snapshot(snap *OperatorSnapshot, keyCodec, nsCodec Codec) error {
	if keyCodec == nil {
		return fmt.Errorf("snapshot of timers %q: %w", s.name, errNoCodec("the key"))
	}
	byGroup := map[int][]byte{}
	var vbuf []byte
	var kw, nw int
	add := func(kind byte, t Timer) error {
		g := KeyGroup(t.Key, s.backend.maxParallelism)
		v := append(vbuf[:0], kind)
		v = binary.AppendVarint(v, t.Timestamp)
		if t.Namespace == nil {
			v = append(v, 0)
		} else {
			if nsCodec == nil {
				return fmt.Errorf("snapshot of timers %q: namespace %v: %w", s.name, t.Namespace, errNoCodec("the namespace"))
			}
			var err error
			if v, err = appendEncoded(append(v, 1), nsCodec, t.Namespace, &nw); err != nil {
				return fmt.Errorf("snapshot of timers %q: namespace %v: %w", s.name, t.Namespace, err)
			}
		}
		vbuf = v
		data, err := appendEncoded(byGroup[g], keyCodec, t.Key, &kw)
		if err != nil {
			return fmt.Errorf("snapshot of timers %q: key %v: %w", s.name, t.Key, err)
		}
		data = binary.AppendUvarint(data, uint64(len(v)))
		byGroup[g] = append(data, v...)
		return nil
	}
	for _, t := range s.event.items {
		if err := add(timerEvent, t); err != nil {
			return err
		}
	}
	for _, t := range s.proc.items {
		if err := add(timerProcessing, t); err != nil {
			return err
		}
	}
	groups := make([]int, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	sort.Ints(groups)
	typ := timersTypeName(keyCodec, nsCodec)
	for _, g := range groups {
		snap.PutKeyed(g, timerSection(s.name), typ, byGroup[g])
	}
	return nil
}

// Restore registers the timers of r's section "timers:<name>" again
// (processing-time ones through the task, so they fire when due). Call it
// in Open; r nil restores nothing.
func (s *TimerService) Restore(r *OperatorRestore, keyCodec, nsCodec Codec) error {
	section := timerSection(s.name)
	if r == nil {
		return nil
	}
	if err := r.CheckType(section, timersTypeName(keyCodec, nsCodec)); err != nil {
		return fmt.Errorf("timers %q: %w", s.name, err)
	}
	return r.KeyedSection(section, func(g int, data []byte) error {
		err := rangeEntries(data, func(kb, vb []byte) error {
			k, err := keyCodec.Decode(kb)
			if err != nil {
				return fmt.Errorf("key: %w", err)
			}
			if len(vb) < 1 {
				return ErrCorruptState
			}
			kind := vb[0]
			ts, n := binary.Varint(vb[1:])
			if n <= 0 || len(vb) < 2+n {
				return ErrCorruptState
			}
			var ns any
			if rest := vb[1+n:]; rest[0] == 1 {
				if nsCodec == nil {
					return errNoCodec("the namespace")
				}
				nb, _, err := readField(rest[1:])
				if err != nil {
					return err
				}
				if ns, err = nsCodec.Decode(nb); err != nil {
					return fmt.Errorf("namespace: %w", err)
				}
			}
			switch kind {
			case timerEvent:
				s.RegisterEventTimeTimer(k, ns, ts)
			case timerProcessing:
				s.RegisterProcessingTimeTimer(k, ns, ts)
			default:
				return ErrCorruptState
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("restoring timers %q, key group %d: %w", s.name, g, err)
		}
		return nil
	})
}
