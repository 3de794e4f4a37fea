package stream

import "time"

// TimestampedValue is a window element with its event timestamp, as an
// Evictor sees it.
type TimestampedValue struct {
	Value        any
	Timestamp    int64
	HasTimestamp bool
}

// EvictorContext is what an Evictor sees of time.
type EvictorContext struct{ op *windowOp }

// CurrentWatermark is the operator's event time.
func (c EvictorContext) CurrentWatermark() int64 { return c.op.timers.CurrentWatermark() }

// CurrentProcessingTime is the clock in milliseconds.
func (c EvictorContext) CurrentProcessingTime() int64 { return c.op.Ctx.ProcessingTime() }

// Evictor removes elements from a window when it fires, before the window
// function sees them or after (Flink's Evictor). Both methods return the
// elements to keep, in order; they may reuse elems. Called on the
// subtask's goroutine with the window's key set.
type Evictor interface {
	EvictBefore(elems []TimestampedValue, w TimeWindow, ctx EvictorContext) []TimestampedValue
	EvictAfter(elems []TimestampedValue, w TimeWindow, ctx EvictorContext) []TimestampedValue
}

// BuiltinEvictor is one of Flink's evictors; by default it evicts before
// the window function, with DoEvictAfter after it.
type BuiltinEvictor struct {
	after bool
	evict func(elems []TimestampedValue) []TimestampedValue
}

// DoEvictAfter evicts after the window function instead of before.
func (e BuiltinEvictor) DoEvictAfter() BuiltinEvictor { e.after = true; return e }

// EvictBefore implements Evictor.
func (e BuiltinEvictor) EvictBefore(elems []TimestampedValue, _ TimeWindow, _ EvictorContext) []TimestampedValue {
	if e.after {
		return elems
	}
	return e.evict(elems)
}

// EvictAfter implements Evictor.
func (e BuiltinEvictor) EvictAfter(elems []TimestampedValue, _ TimeWindow, _ EvictorContext) []TimestampedValue {
	if !e.after {
		return elems
	}
	return e.evict(elems)
}

// CountEvictor keeps the last n elements (Flink's CountEvictor).
func CountEvictor(n int64) BuiltinEvictor {
	return BuiltinEvictor{evict: func(elems []TimestampedValue) []TimestampedValue {
		if int64(len(elems)) <= n {
			return elems
		}
		return elems[int64(len(elems))-n:]
	}}
}

// TimeEvictor keeps the elements within size of the latest element's
// timestamp: those with a timestamp above max - size (Flink's
// TimeEvictor). Elements without timestamps are all kept.
func TimeEvictor(size time.Duration) BuiltinEvictor {
	ms := size.Milliseconds()
	return BuiltinEvictor{evict: func(elems []TimestampedValue) []TimestampedValue {
		var maxTs int64
		found := false
		for _, e := range elems {
			if e.HasTimestamp && (!found || e.Timestamp > maxTs) {
				maxTs, found = e.Timestamp, true
			}
		}
		if !found {
			return elems
		}
		kept := elems[:0]
		for _, e := range elems {
			if !e.HasTimestamp || e.Timestamp > maxTs-ms {
				kept = append(kept, e)
			}
		}
		return kept
	}}
}

// DeltaEvictor keeps the elements whose delta to the last element is below
// threshold (Flink's DeltaEvictor).
func DeltaEvictor[T any](threshold float64, delta func(a, b T) float64) BuiltinEvictor {
	return BuiltinEvictor{evict: func(elems []TimestampedValue) []TimestampedValue {
		if len(elems) == 0 {
			return elems
		}
		last := as[T](elems[len(elems)-1].Value)
		kept := elems[:0]
		for _, e := range elems {
			if delta(as[T](e.Value), last) < threshold {
				kept = append(kept, e)
			}
		}
		return kept
	}}
}
