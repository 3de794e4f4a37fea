package checkpointing

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/failure"
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
	// LocalState, if set, gets a copy of every checkpoint's state file
	// (task-local recovery, local.go); nil keeps none.
	LocalState *TaskLocalStateStore
	Log        zerolog.Logger
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
		snap.Release()
		r.Decline(b.ID, ErrClosed)
		return
	}
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		start := time.Now()
		// The operators' own asynchronous parts (a transactional sink's
		// fsync), then the state: the checkpoint needs both.
		err := snap.Persist()
		var hs []*pb.OperatorSubtaskStateHandle
		var size sizes
		if err == nil {
			hs, size, err = r.writeWithShared(b, snap)
		}
		snap.Release() // after a failure before the keyed state was streamed
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
				StateSize: size.state, CheckpointedSize: size.checkpointed,
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
		JobId: r.cfg.JobID, Attempt: r.cfg.Attempt, CheckpointId: id, Reason: failure.Encode(cause),
	}}})
}

// NotifyEndOfData implements runtime.EndOfDataNotifier: the report goes
// on the ordered stream, after the acknowledgements sent before it.
func (r *Responder) NotifyEndOfData() {
	r.cfg.Report(&pb.RunnerCheckpointReport{Report: &pb.RunnerCheckpointReport_EndOfData{EndOfData: &pb.NotifyEndOfDataRequest{
		JobId: r.cfg.JobID, Attempt: r.cfg.Attempt,
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
// The file is encoded straight into storage in one pass: the first bytes
// are kept in memory (a small state goes inline in the handles), then the
// temporary file is created and everything streams through a large
// buffer; it is closed (durable) and renamed into place.
func (r *Responder) write(b runtime.CheckpointBarrier, snap *runtime.TaskSnapshot) ([]*pb.OperatorSubtaskStateHandle, int64, error) {
	a := r.cfg.Attempt
	sub, par, maxPar := int(a.GetSubtaskIndex()), r.cfg.Parallelism, r.cfg.MaxParallelism
	if snap == nil {
		snap = &runtime.TaskSnapshot{}
	}
	name := fmt.Sprintf("%s-%d-%d-%s", a.GetJobVertexId(), sub, a.GetAttemptNumber(), randomHex(8))
	uri := b.Options.TargetLocation + "/" + name
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.WriteTimeout)
	defer cancel()
	sw := &spillWriter{ctx: ctx, limit: max(r.cfg.InlineThreshold, spillLimit), open: func() (*fileTarget, error) {
		if b.Options.TargetLocation == "" {
			return nil, fmt.Errorf("checkpoint %d has no target location", b.ID)
		}
		fsys, dir, err := r.cfg.FileSystems.Resolve(ctx, b.Options.TargetLocation)
		if err != nil {
			return nil, err
		}
		return createTarget(ctx, fsys, path.Join(dir, name))
	}}
	var w io.Writer = sw
	lc := r.localCopy(b, name)
	if lc != nil {
		w = io.MultiWriter(sw, lc)
	}
	keptLocal := false
	defer func() { r.keepLocal(b, lc, keptLocal) }()
	hs, size, err := EncodeTo(w, snap, sub, par, maxPar)
	if err == nil {
		err = sw.finish()
	}
	if err != nil {
		sw.abort()
		return nil, 0, fmt.Errorf("state file %s: %w", uri, err)
	}
	if sw.target == nil {
		stored := false
		for _, h := range hs {
			stored = stored || hasData(h)
		}
		if !stored {
			return hs, 0, nil // nothing to store: the handles carry the flags
		}
		if len(sw.buf) < r.cfg.InlineThreshold {
			return inline(sw.buf, hs), size, nil // inline state is in the deployment: no local copy
		}
		if b.Options.TargetLocation == "" {
			return nil, 0, fmt.Errorf("checkpoint %d has no target location", b.ID)
		}
		fsys, dir, err := r.cfg.FileSystems.Resolve(ctx, b.Options.TargetLocation)
		if err != nil {
			return nil, 0, fmt.Errorf("state file %s: %w", uri, err)
		}
		if _, err := storage.WriteFileAtomic(ctx, fsys, path.Join(dir, name), bytes.NewReader(sw.buf)); err != nil {
			return nil, 0, fmt.Errorf("state file %s: %w", uri, err)
		}
	}
	keptLocal = true
	for _, h := range hs {
		if hasData(h) {
			h.File = &pb.StateFile{Path: name, Size: size}
		}
	}
	return hs, size, nil
}

// inline gives every handle with data its own bytes: a header and its
// operator's blobs (contiguous in data; the head operator's span also
// covers the in-flight data written after the last operator), regions
// rebased.
func inline(data []byte, hs []*pb.OperatorSubtaskStateHandle) []*pb.OperatorSubtaskStateHandle {
	for _, h := range hs {
		if !hasData(h) {
			continue
		}
		var regions []*pb.StateFileRegion
		for _, kg := range h.KeyGroups {
			regions = append(regions, kg.Region)
		}
		for _, l := range h.ListStates {
			regions = append(regions, l.Elements...)
		}
		for _, f := range h.InFlight {
			regions = append(regions, f.Region)
		}
		lo, hi := regions[0].Offset, regions[0].Offset+regions[0].Length
		for _, rg := range regions {
			lo, hi = min(lo, rg.Offset), max(hi, rg.Offset+rg.Length)
		}
		own := append(appendHeader(make([]byte, 0, headerLen+int(hi-lo))), data[lo:hi]...)
		for _, rg := range regions {
			rg.Offset += int64(headerLen) - lo
		}
		h.File = &pb.StateFile{Size: int64(len(own)), Inline: own}
	}
	return hs
}

// spillLimit is how much of a state file is kept in memory before the
// file is created.
const spillLimit = 1 << 20

// spillWriter keeps the first limit bytes in memory, then opens the file
// and streams the rest through a large buffer.
type spillWriter struct {
	ctx    context.Context
	limit  int
	open   func() (*fileTarget, error)
	buf    []byte
	target *fileTarget
	bw     *bufio.Writer
	// since counts the bytes since ctx was last checked.
	since int
}

func (s *spillWriter) Write(p []byte) (int, error) {
	if s.target == nil {
		if len(s.buf)+len(p) <= s.limit {
			s.buf = append(s.buf, p...)
			return len(p), nil
		}
		t, err := s.open()
		if err != nil {
			return 0, err
		}
		s.target = t
		s.bw = bufio.NewWriterSize(t.w, writeBufferSize)
		if _, err := s.bw.Write(s.buf); err != nil {
			return 0, err
		}
		s.buf = nil
	}
	if s.since += len(p); s.since >= writeBufferSize {
		s.since = 0
		if err := s.ctx.Err(); err != nil {
			return 0, err
		}
	}
	return s.bw.Write(p)
}

// finish flushes, closes (durably) and renames the file, if it was opened.
func (s *spillWriter) finish() error {
	if s.target == nil {
		return nil
	}
	if err := s.bw.Flush(); err != nil {
		return err
	}
	return s.target.commit()
}

// abort removes the temporary file, if any.
func (s *spillWriter) abort() {
	if s.target != nil {
		s.target.abort()
	}
}

// writeBufferSize is the buffer between the encoder and the file: large
// writes keep the system calls few (the local writer does no buffering).
const writeBufferSize = 4 << 20

// fileTarget is a state file being written under a temporary name, as
// storage.WriteFileAtomic does, but fed by the encoder as it goes.
type fileTarget struct {
	ctx      context.Context
	fsys     storage.FileSystem
	tmp, dst string
	w        io.WriteCloser
	closed   bool
}

func createTarget(ctx context.Context, fsys storage.FileSystem, p string) (*fileTarget, error) {
	if err := fsys.MkdirAll(ctx, path.Dir(p)); err != nil {
		return nil, err
	}
	dir, name := path.Split(p)
	tmp := path.Join(dir, "."+name+".tmp-"+randomHex(8))
	w, err := fsys.Create(ctx, tmp)
	if err != nil {
		return nil, err
	}
	return &fileTarget{ctx: ctx, fsys: fsys, tmp: tmp, dst: p, w: w}, nil
}

func (t *fileTarget) commit() error {
	t.closed = true
	if err := t.w.Close(); err != nil {
		return err
	}
	return t.fsys.Rename(t.ctx, t.tmp, t.dst)
}

func (t *fileTarget) abort() {
	if !t.closed {
		t.closed = true
		_ = t.w.Close()
	}
	// A fresh context: the cleanup must run even if ctx ended.
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = t.fsys.RemoveAll(cctx, t.tmp)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
