package checkpointing

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/jobmanager/failover"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/storage"
	"github.com/gofl/gofl/stream/runtime"
)

// DefaultInlineThreshold is the size below which a task's whole state
// travels inline in its handles instead of in a file (Flink's
// state.storage.fs.memory-threshold, 20 KiB).
const DefaultInlineThreshold = 20 << 10

// ErrClosed declines the checkpoints a closed Responder had not written.
var ErrClosed = errors.New("checkpointing: the task ended before its state was written")

// ResponderConfig describes the task attempt a Responder writes for.
type ResponderConfig struct {
	JobID   string
	Attempt *pb.ExecutionAttemptID
	// Parallelism and MaxParallelism of the task's vertex; the subtask
	// index comes from Attempt.
	Parallelism, MaxParallelism int
	// FileSystems opens the checkpoint storage (shared by the runner).
	FileSystems *FileSystems
	// Report takes each acknowledgement or decline, in the order the
	// writes end. It must not block (the runner queues it for its
	// WatchCheckpoints stream). Called from the Responder's goroutines.
	Report func(*pb.RunnerCheckpointReport)
	// InlineThreshold: states smaller than this (in all) go inline; 0 means
	// DefaultInlineThreshold, negative never.
	InlineThreshold int
	// WriteTimeout bounds one state file write; default 10 minutes.
	WriteTimeout time.Duration
	Log          zerolog.Logger
}

// Responder is the runtime.CheckpointResponder of one task attempt: it
// writes snapshots asynchronously, one goroutine per checkpoint, which
// Close stops.
type Responder struct {
	cfg    ResponderConfig
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
}

var _ runtime.CheckpointResponder = (*Responder)(nil)

// NewResponder returns a Responder for cfg.
func NewResponder(cfg ResponderConfig) *Responder {
	if cfg.InlineThreshold == 0 {
		cfg.InlineThreshold = DefaultInlineThreshold
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Minute
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Responder{cfg: cfg, ctx: ctx, cancel: cancel}
}

// Acknowledge implements runtime.CheckpointResponder: it starts the write
// and returns. The report follows when the write ends: an acknowledgement
// with the handles, or a decline naming the file and the cause. After
// Close it declines at once.
func (r *Responder) Acknowledge(b runtime.CheckpointBarrier, snap *runtime.TaskSnapshot, m runtime.CheckpointSyncMetrics) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.Decline(b.ID, ErrClosed)
		return
	}
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		start := time.Now()
		hs, size, err := r.write(b, snap)
		if err != nil {
			if r.ctx.Err() != nil {
				err = fmt.Errorf("%w: %w", ErrClosed, err)
			}
			r.cfg.Log.Warn().Err(err).Int64("checkpoint_id", b.ID).Msg("writing the task's state failed; declining the checkpoint")
			r.Decline(b.ID, err)
			return
		}
		r.cfg.Report(&pb.RunnerCheckpointReport{Report: &pb.RunnerCheckpointReport_Acknowledge{Acknowledge: &pb.AcknowledgeCheckpointRequest{
			JobId: r.cfg.JobID, Attempt: r.cfg.Attempt, CheckpointId: b.ID, Operators: hs,
			Metrics: &pb.CheckpointMetrics{
				StateSize: size, CheckpointedSize: size,
				SyncDurationMs: m.SyncDuration.Milliseconds(), AsyncDurationMs: time.Since(start).Milliseconds(),
				AlignmentDurationMs: m.AlignmentDuration.Milliseconds(), PersistedInFlightBytes: m.PersistedInFlightBytes,
				Unaligned: m.Unaligned,
			},
		}}})
	}()
}

// Decline implements runtime.CheckpointResponder.
func (r *Responder) Decline(id int64, cause error) {
	r.cfg.Report(&pb.RunnerCheckpointReport{Report: &pb.RunnerCheckpointReport_Decline{Decline: &pb.DeclineCheckpointRequest{
		JobId: r.cfg.JobID, Attempt: r.cfg.Attempt, CheckpointId: id, Reason: failover.Encode(cause),
	}}})
}

// Close stops the writes in flight (they decline) and waits for them.
// Idempotent; call it once the task ended.
func (r *Responder) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
}

// write stores the snapshot and returns its handles and its size in bytes.
func (r *Responder) write(b runtime.CheckpointBarrier, snap *runtime.TaskSnapshot) ([]*pb.OperatorSubtaskStateHandle, int64, error) {
	a := r.cfg.Attempt
	sub, par, maxPar := int(a.GetSubtaskIndex()), r.cfg.Parallelism, r.cfg.MaxParallelism
	if snap == nil {
		snap = &runtime.TaskSnapshot{}
	}
	data, hs := Encode(snap, sub, par, maxPar)
	stored := false
	for _, h := range hs {
		stored = stored || hasData(h)
	}
	if !stored {
		return hs, 0, nil // nothing to store: the handles carry the flags
	}
	if len(data) < r.cfg.InlineThreshold {
		return r.inline(snap, sub, par, maxPar), int64(len(data)), nil
	}
	if b.Options.TargetLocation == "" {
		return nil, 0, fmt.Errorf("checkpoint %d has no target location", b.ID)
	}
	name := fmt.Sprintf("%s-%d-%d-%s", a.GetJobVertexId(), sub, a.GetAttemptNumber(), randomHex(8))
	uri := b.Options.TargetLocation + "/" + name
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.WriteTimeout)
	defer cancel()
	fsys, dir, err := r.cfg.FileSystems.Resolve(ctx, b.Options.TargetLocation)
	if err != nil {
		return nil, 0, fmt.Errorf("state file %s: %w", uri, err)
	}
	if _, err := storage.WriteFileAtomic(ctx, fsys, path.Join(dir, name), bytes.NewReader(data)); err != nil {
		return nil, 0, fmt.Errorf("state file %s: %w", uri, err)
	}
	for _, h := range hs {
		if hasData(h) {
			h.File = &pb.StateFile{Path: name, Size: int64(len(data))}
		}
	}
	return hs, int64(len(data)), nil
}

// inline encodes each operator on its own, so every handle carries only
// its own bytes.
func (r *Responder) inline(snap *runtime.TaskSnapshot, sub, par, maxPar int) []*pb.OperatorSubtaskStateHandle {
	var hs []*pb.OperatorSubtaskStateHandle
	for i, op := range snap.Operators {
		if op == nil {
			continue
		}
		ts := &runtime.TaskSnapshot{Operators: []*runtime.OperatorSnapshot{op}}
		if i == 0 {
			ts.InFlight = snap.InFlight // with the head operator
		}
		data, one := Encode(ts, sub, par, maxPar)
		h := one[0]
		if hasData(h) {
			h.File = &pb.StateFile{Size: int64(len(data)), Inline: data}
		}
		hs = append(hs, h)
	}
	return hs
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
