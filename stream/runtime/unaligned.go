package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Unaligned checkpoints (Flink's FLIP-76). A task takes an unaligned
// checkpoint at the FIRST barrier it receives: it snapshots its operators
// at once and forwards the barrier as a priority event, which overtakes
// the data queued in its writers (that data is the output's in-flight
// data). Every input channel that has not delivered the barrier yet
// "captures": the records it delivers until its barrier (an in-band
// barrier, or the EventBarrierPosition of a priority one) are recorded as
// its input channel state, and processed as usual. Records are captured
// when they reach the task (a batch read from a gate), not when they are
// processed, so the checkpoint is acknowledged as soon as every barrier
// arrived. An aligned checkpoint with CheckpointOptions.AlignedTimeout
// switches to unaligned once its alignment at this task lasted that long.
// Savepoints are always aligned.

// InFlightData is in-flight data of an unaligned checkpoint: the records
// one input channel received before its barrier, or the records one output
// subpartition had queued when the barrier overtook them. Data is a
// sequence of records, each a uvarint length and the record (a flags byte,
// bit 0: has a timestamp, then the zig-zag varint timestamp, then the
// value's codec bytes), encoded with the input's or output's codec.
type InFlightData struct {
	// Output: Gate is the output's index and Channel the subpartition;
	// otherwise Gate is the logical input and Channel its channel.
	Output  bool
	Gate    int
	Channel int
	Data    []byte
}

// PriorityWriter is a ResultWriter that can send a barrier ahead of what
// it queued (a pipelined network partition). EmitPriority is called on the
// task goroutine; it returns the events the barrier overtook, in order,
// which are still delivered after it.
type PriorityWriter interface {
	EmitPriority(subpartition int, ev Event) ([]Event, error)
}

// PriorityInputGate is an InputGate that delivers priority barriers ahead
// of its queued batches: a ChannelBatch of one EventBarrier with Priority
// set. The EventBarrierPosition of each follows later on Batches, in
// order. Priority is never closed.
type PriorityInputGate interface {
	InputGate
	Priority() <-chan ChannelBatch
}

// ErrInFlightRescale: a restore of unaligned in-flight data at a different
// parallelism (channel state is not redistributed).
var ErrInFlightRescale = errors.New("runtime: unaligned checkpoint in-flight data cannot be restored after rescaling")

// appendInFlightRecord appends r to in-flight data.
func appendInFlightRecord(dst []byte, c Codec, r Record) ([]byte, error) {
	var tmp []byte
	if r.HasTimestamp {
		tmp = append(tmp, 1)
		tmp = binary.AppendVarint(tmp, r.Timestamp)
	} else {
		tmp = append(tmp, 0)
	}
	tmp, err := c.Append(tmp, r.Value)
	if err != nil {
		return dst, err
	}
	dst = binary.AppendUvarint(dst, uint64(len(tmp)))
	return append(dst, tmp...), nil
}

// decodeInFlight parses in-flight data into records.
func decodeInFlight(c Codec, data []byte) ([]Record, error) {
	var out []Record
	for len(data) > 0 {
		l, n := binary.Uvarint(data)
		if n <= 0 || l > uint64(len(data)-n) || l == 0 {
			return nil, fmt.Errorf("runtime: corrupt in-flight data")
		}
		rec := data[n : n+int(l)]
		data = data[n+int(l):]
		var r Record
		rest := rec[1:]
		switch rec[0] {
		case 0:
		case 1:
			ts, m := binary.Varint(rest)
			if m <= 0 {
				return nil, fmt.Errorf("runtime: corrupt in-flight record timestamp")
			}
			r.Timestamp, r.HasTimestamp = ts, true
			rest = rest[m:]
		default:
			return nil, fmt.Errorf("runtime: corrupt in-flight record header")
		}
		v, err := c.Decode(rest)
		if err != nil {
			return nil, fmt.Errorf("runtime: in-flight record: %w", err)
		}
		r.Value = v
		out = append(out, r)
	}
	return out, nil
}

// unalignedOK reports whether b may be taken unaligned here.
func unalignedOK(b CheckpointBarrier) bool {
	return b.Options.ExactlyOnce && !b.Options.Type.IsSavepoint()
}

// alignDeadline is when the current alignment switches to unaligned, or
// zero.
func (t *task) alignDeadline() time.Time {
	ck := t.ck
	if ck == nil || !ck.aligning || ck.unaligned || ck.barrier.Options.AlignedTimeout <= 0 || !unalignedOK(ck.barrier) {
		return time.Time{}
	}
	return ck.alignStart.Add(ck.barrier.Options.AlignedTimeout)
}

// checkAlignTimeout switches an alignment that lasted too long.
func (t *task) checkAlignTimeout() {
	if d := t.alignDeadline(); !d.IsZero() && !t.now().Before(d) {
		t.switchToUnaligned(nil, false)
	}
}

// switchToUnaligned takes the checkpoint being aligned unaligned. from is
// the channel whose barrier triggers it (nil for a timeout); priority: its
// barrier came ahead of its data, which it captures up to the position.
func (t *task) switchToUnaligned(from *chanState, priority bool) {
	ck := t.ck
	id := ck.barrier.ID
	ck.unaligned = true
	in := t.in
	for gi := range in.gates {
		for c := range in.gates[gi].ch {
			ch := &in.gates[gi].ch[c]
			if ch.ended || (ch == from && !priority) || (ch != from && ch.barrier == id) {
				continue // its barrier is here: held data is after it
			}
			ch.capturing, ch.captured = true, nil
			ck.capturing++
			for _, evs := range ch.held {
				if t.captureEvents(gi, c, evs) {
					break
				}
			}
		}
	}
	t.unblock()
	// The barrier goes on as unaligned, so downstream tasks do not align.
	b := ck.barrier
	b.Options.Unaligned = true
	t.performCheckpoint(b, t.now().Sub(ck.alignStart), true)
}

// captureEvents records the records of channel c of input gi while it
// captures, up to its barrier; it reports whether the capture ended.
func (t *task) captureEvents(gi, c int, evs []Event) bool {
	ck := t.ck
	ch := &t.in.gates[gi].ch[c]
	id := ck.barrier.ID
	for i := range evs {
		ev := &evs[i]
		switch ev.Kind {
		case EventRecord:
			if gi >= len(t.spec.InputCodecs) || t.spec.InputCodecs[gi] == nil {
				ck.unalignedErr = fmt.Errorf("capturing input %d: no codec", gi)
				continue
			}
			var err error
			ch.captured, err = appendInFlightRecord(ch.captured, t.spec.InputCodecs[gi], ev.Record)
			if err != nil {
				ck.unalignedErr = fmt.Errorf("capturing input %d channel %d: %w", gi, c, err)
			}
			continue
		case EventBarrier, EventBarrierPosition:
			if ev.Barrier.ID < id {
				continue
			}
			if ev.Barrier.ID > id {
				ck.unalignedErr = fmt.Errorf("%w: checkpoint %d by %d before its barrier on input %d channel %d", ErrCheckpointSubsumed, id, ev.Barrier.ID, gi, c)
			}
		case EventCancelBarrier:
			if ev.Barrier.ID < id {
				continue
			}
			ck.unalignedErr = fmt.Errorf("%w: checkpoint %d", ErrCheckpointCancelled, id)
		case EventEndOfPartition:
		default:
			continue
		}
		ch.capturing = false
		ck.capturing--
		return true
	}
	return false
}

// capturedBatch is called for a batch that reached the task on a
// capturing channel.
func (t *task) capturedBatch(gi, c int, evs []Event) {
	if t.captureEvents(gi, c, evs) {
		t.maybeFinishUnaligned()
	}
}

// maybeFinishUnaligned acknowledges the pending unaligned checkpoint once
// every channel's barrier arrived (or declines it).
func (t *task) maybeFinishUnaligned() {
	ck := t.ck
	if !ck.unaligned || ck.capturing > 0 || ck.pendSnap == nil {
		return
	}
	if err := ck.unalignedErr; err != nil {
		t.abortAlignment(err)
		return
	}
	snap, m := ck.pendSnap, ck.pendMetrics
	snap.InFlight = append(snap.InFlight, ck.outFlight...)
	for gi := range t.inGates() {
		for c := range t.in.gates[gi].ch {
			ch := &t.in.gates[gi].ch[c]
			if len(ch.captured) > 0 {
				snap.InFlight = append(snap.InFlight, InFlightData{Gate: gi, Channel: c, Data: ch.captured})
			}
			ch.captured = nil
		}
	}
	for _, d := range snap.InFlight {
		m.PersistedInFlightBytes += int64(len(d.Data))
	}
	if head := t.nodes[0].spec.ID; len(snap.InFlight) > 0 && (len(snap.Operators) == 0 || snap.Operators[0].OperatorID != head) {
		// The in-flight data is stored with the head operator's handle.
		s0 := &OperatorSnapshot{OperatorID: head, CheckpointID: ck.barrier.ID, Type: ck.barrier.Options.Type}
		snap.Operators = append([]*OperatorSnapshot{s0}, snap.Operators...)
	}
	m.Unaligned = true
	b := ck.barrier
	ck.pendSnap = nil // acknowledged: the Responder owns it now
	t.clearUnaligned()
	ck.aligning = false
	ck.resp.Acknowledge(b, snap, m)
}

// inGates is the input state's gates (none for a source).
func (t *task) inGates() []gateState {
	if t.in == nil {
		return nil
	}
	return t.in.gates
}

// clearUnaligned drops the state of a pending unaligned checkpoint,
// releasing a snapshot that will not be acknowledged.
func (t *task) clearUnaligned() {
	ck := t.ck
	if ck.pendSnap != nil {
		ck.pendSnap.Release()
	}
	ck.unaligned, ck.capturing, ck.pendSnap, ck.outFlight, ck.unalignedErr = false, 0, nil, nil, nil
	if t.in == nil {
		return
	}
	for gi := range t.in.gates {
		for c := range t.in.gates[gi].ch {
			ch := &t.in.gates[gi].ch[c]
			ch.capturing, ch.captured = false, nil
		}
	}
}

// emitBarrier sends barrier b on every subpartition of every writer; with
// priority through PriorityWriter, collecting the overtaken records as
// output in-flight data.
func (t *task) emitBarrier(b CheckpointBarrier, priority bool) ([]InFlightData, error) {
	var out []InFlightData
	for wi, w := range t.writers {
		pw, ok := w.(PriorityWriter)
		for s, n := 0, w.NumSubpartitions(); s < n; s++ {
			ev := Event{Kind: EventBarrier, Barrier: b}
			if !priority || !ok {
				if err := w.Emit(s, ev); err != nil {
					panic(abort{err})
				}
				continue
			}
			ev.Priority = true
			over, err := pw.EmitPriority(s, ev)
			if err != nil {
				panic(abort{err})
			}
			var data []byte
			for _, o := range over {
				if o.Kind != EventRecord {
					continue // watermarks and end markers are re-derived after a restore
				}
				if t.spec.Outputs[wi].Codec == nil {
					return nil, fmt.Errorf("capturing output %d: no codec", wi)
				}
				if data, err = appendInFlightRecord(data, t.spec.Outputs[wi].Codec, o.Record); err != nil {
					return nil, fmt.Errorf("capturing output %d subpartition %d: %w", wi, s, err)
				}
			}
			if len(data) > 0 {
				out = append(out, InFlightData{Output: true, Gate: wi, Channel: s, Data: data})
			}
		}
	}
	return out, nil
}

// restoreInFlight checks the restored in-flight data against this task's
// channels and subpartitions.
func (t *task) checkInFlight() error {
	r := t.env.Restore
	if r == nil {
		return nil
	}
	for _, d := range r.InFlight {
		if d.Output {
			if d.Gate >= len(t.writers) || d.Channel >= t.writers[d.Gate].NumSubpartitions() {
				return fmt.Errorf("%w: task %q output %d subpartition %d", ErrInFlightRescale, t.spec.Name, d.Gate, d.Channel)
			}
			continue
		}
		if d.Gate >= len(t.env.Gates) || d.Channel >= t.env.Gates[d.Gate].NumChannels() {
			return fmt.Errorf("%w: task %q input %d channel %d", ErrInFlightRescale, t.spec.Name, d.Gate, d.Channel)
		}
	}
	return nil
}

// emitRestoredOutput emits the restored output in-flight data first.
func (t *task) emitRestoredOutput() error {
	r := t.env.Restore
	if r == nil {
		return nil
	}
	for _, d := range r.InFlight {
		if !d.Output {
			continue
		}
		recs, err := decodeInFlight(t.spec.Outputs[d.Gate].Codec, d.Data)
		if err != nil {
			return fmt.Errorf("task %q output %d: %w", t.spec.Name, d.Gate, err)
		}
		for _, rec := range recs {
			if err := t.writers[d.Gate].Emit(d.Channel, Event{Kind: EventRecord, Record: rec}); err != nil {
				return err
			}
		}
	}
	return nil
}

// replayRestoredInput processes the restored input channel state, channel
// by channel in order, before the gates are read.
func (t *task) replayRestoredInput() error {
	r := t.env.Restore
	if r == nil {
		return nil
	}
	head := t.nodes[0]
	for _, d := range r.InFlight {
		if d.Output {
			continue
		}
		recs, err := decodeInFlight(t.spec.InputCodecs[d.Gate], d.Data)
		if err != nil {
			return fmt.Errorf("task %q input %d channel %d: %w", t.spec.Name, d.Gate, d.Channel, err)
		}
		for _, rec := range recs {
			head.processInput(d.Gate, rec)
		}
	}
	return nil
}

// AvailabilityWriter is a ResultWriter that tells whether it can take
// output without blocking (Flink's output availability). Available
// returns nil when it can, else a channel closed when it may again (check
// again: wake-ups can be spurious); it never blocks. A task with
// checkpointing waits for it before each source poll and each input
// batch, taking checkpoint triggers and priority barriers meanwhile, so a
// back-pressured task is not stuck inside an Emit when a checkpoint
// arrives (it would delay an unaligned checkpoint by the whole drain).
type AvailabilityWriter interface {
	Available() <-chan struct{}
}

// blockedOutput returns the availability channel of a writer that
// cannot take output now, or nil.
func (t *task) blockedOutput() <-chan struct{} {
	for _, w := range t.writers {
		if aw, ok := w.(AvailabilityWriter); ok {
			if c := aw.Available(); c != nil {
				return c
			}
		}
	}
	return nil
}

// waitOutput waits while an output is back-pressured, handling control
// messages and priority barriers meanwhile. It returns handled after
// handling one (the caller re-checks its state and calls again), or
// false once every output is available.
func (t *task) waitOutput() (handled bool, err error) {
	if t.ck == nil {
		return false, nil
	}
	var timeout <-chan time.Time
	for {
		avail := t.blockedOutput()
		if avail == nil {
			return false, nil
		}
		if d := t.alignDeadline(); timeout == nil && !d.IsZero() {
			tm := time.NewTimer(d.Sub(t.now()))
			defer tm.Stop()
			timeout = tm.C
		}
		select {
		case <-timeout:
			return true, nil // the alignment switches to unaligned
		case <-avail:
		case m := <-t.ctl:
			t.onControl(m)
			return true, nil
		case pb := <-t.prioChan(0):
			t.onPriority(0, pb)
			return true, nil
		case pb := <-t.prioChan(1):
			t.onPriority(1, pb)
			return true, nil
		case <-t.ctx.Done():
			return false, t.ctx.Err()
		}
	}
}
