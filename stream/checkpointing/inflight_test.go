package checkpointing

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/storage"
	"github.com/gofl/gofl/stream/runtime"
)

// TestInFlightRoundtrip: the in-flight data of two subtasks, in a file and
// inline, comes back to the subtask that wrote it only, in full, with the
// metrics reported; a restore at another parallelism fails clearly.
func TestInFlightRoundtrip(t *testing.T) {
	for _, inline := range []int{-1, 1 << 20} {
		t.Run(fmt.Sprintf("inline=%d", inline), func(t *testing.T) {
			fss := NewFileSystems(storage.Options{})
			defer fss.Close()
			loc := "file://" + t.TempDir()
			rep := newReports()
			tr := &pb.TaskRestore{CheckpointId: 9, Location: loc}
			want := map[int][]runtime.InFlightData{}
			for sub := range 2 {
				snap := &runtime.TaskSnapshot{
					Operators: []*runtime.OperatorSnapshot{{OperatorID: "head"}, {OperatorID: "tail", Lists: map[string]runtime.ListStateSnapshot{
						"l": {Mode: runtime.SplitList, Elements: [][]byte{[]byte("x")}}}}},
					InFlight: []runtime.InFlightData{
						{Gate: 0, Channel: 1, Data: []byte(fmt.Sprintf("in-%d", sub))},
						{Output: true, Gate: 0, Channel: 0, Data: []byte(fmt.Sprintf("out-%d", sub))},
					},
				}
				want[sub] = snap.InFlight
				r := NewResponder(ResponderConfig{JobID: "job", Attempt: attempt(sub), Parallelism: 2, MaxParallelism: maxPar,
					FileSystems: fss, Report: rep.report, InlineThreshold: inline, Log: zerolog.Nop()})
				r.Acknowledge(runtime.CheckpointBarrier{ID: 9, Options: runtime.CheckpointOptions{TargetLocation: loc}}, snap,
					runtime.CheckpointSyncMetrics{Unaligned: true, PersistedInFlightBytes: 10})
				ack := rep.next(t).GetAcknowledge()
				r.Close()
				if ack == nil || !ack.Metrics.Unaligned || ack.Metrics.PersistedInFlightBytes != 10 {
					t.Fatalf("ack %v", ack)
				}
				if h := ack.Operators[0]; len(h.InFlight) != 2 || h.File == nil || !h.InFlight[1].Output {
					t.Fatalf("head handle %v", h)
				}
				tr.Operators = append(tr.Operators, ack.Operators...)
			}
			for sub := range 2 {
				got, err := Restore(context.Background(), fss, tr, sub, 2, maxPar)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.EqualFunc(sortInFlight(got.InFlight), sortInFlight(want[sub]), func(a, b runtime.InFlightData) bool {
					return a.Output == b.Output && a.Gate == b.Gate && a.Channel == b.Channel && string(a.Data) == string(b.Data)
				}) {
					t.Fatalf("subtask %d restored %v, want %v", sub, got.InFlight, want[sub])
				}
			}
			if _, err := Restore(context.Background(), fss, tr, 0, 3, maxPar); !errors.Is(err, runtime.ErrInFlightRescale) {
				t.Fatalf("restore at parallelism 3: %v, want ErrInFlightRescale", err)
			}
		})
	}
}

func sortInFlight(ds []runtime.InFlightData) []runtime.InFlightData {
	ds = slices.Clone(ds)
	slices.SortFunc(ds, func(a, b runtime.InFlightData) int {
		if a.Output != b.Output {
			if a.Output {
				return 1
			}
			return -1
		}
		return a.Channel - b.Channel
	})
	return ds
}
