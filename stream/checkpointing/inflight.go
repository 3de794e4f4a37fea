package checkpointing

import (
	"fmt"

	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/stream/runtime"
)

// In-flight data of unaligned checkpoints: each runtime.InFlightData is one
// blob of the task's state file, listed as a pb.InFlightDataHandle in the
// handle of the chain's head operator (the first operator of the
// snapshot; the runtime puts the head there whenever it has in-flight
// data). Channel state is not redistributed: only the subtask that wrote
// it restores it, and only at the parallelism it was written with.

// encodeInFlight appends snap's in-flight data to e and lists it in hs[0].
func encodeInFlight(e *encoder, snap *runtime.TaskSnapshot, hs []*pb.OperatorSubtaskStateHandle) {
	if len(snap.InFlight) == 0 || len(hs) == 0 {
		return
	}
	for _, d := range snap.InFlight {
		hs[0].InFlight = append(hs[0].InFlight, &pb.InFlightDataHandle{
			Gate: int32(d.Gate), Channel: int32(d.Channel), Output: d.Output, Region: e.blob(d.Data)})
	}
}

// restoreInFlight plans the reads of the in-flight data of h into out
// when h is this subtask's own, and fails when it was written at another
// parallelism.
func restoreInFlight(rd *reader, id string, h *pb.OperatorSubtaskStateHandle, subtask, parallelism int, out *runtime.TaskRestore) error {
	if len(h.InFlight) == 0 {
		return nil
	}
	if int(h.Parallelism) != parallelism {
		return fmt.Errorf("checkpointing: operator %s: %w (subtask %d of %d wrote in-flight data, the job now runs %d subtasks; take a savepoint, which is always aligned, to rescale)",
			id, runtime.ErrInFlightRescale, h.SubtaskIndex, h.Parallelism, parallelism)
	}
	if int(h.SubtaskIndex) != subtask {
		return nil
	}
	for _, f := range h.InFlight {
		if f.Gate < 0 || f.Channel < 0 {
			return fmt.Errorf("%w: operator %s: in-flight data of gate %d channel %d", ErrCorrupt, id, f.Gate, f.Channel)
		}
		d := runtime.InFlightData{Output: f.Output, Gate: int(f.Gate), Channel: int(f.Channel)}
		if err := rd.add(id, h, f.Region, func(body []byte) error {
			d.Data = append([]byte(nil), body...)
			out.InFlight = append(out.InFlight, d)
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}
