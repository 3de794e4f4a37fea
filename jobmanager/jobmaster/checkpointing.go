package jobmaster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/failure"
	"github.com/gofl/gofl/ha"
	"github.com/gofl/gofl/internal/mailbox"
	"github.com/gofl/gofl/internal/outbox"
	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/jobmanager/checkpoint"
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/jobmanager/scheduler"
	"github.com/gofl/gofl/rpc/pb"
)

// ErrRestore fails a submission whose savepoint cannot be restored.
var ErrRestore = errors.New("jobmaster: cannot restore the job's state")

// ioTimeout bounds one metadata write or discard.
const ioTimeout = 2 * time.Minute

// SavepointStatus is the state of a savepoint request.
type SavepointStatus struct {
	Done     bool
	ID       int64
	Location string
	Err      error
}

// ReadSavepoint reads cfg.SavepointPath (execution.savepoint.path) and checks
// that jg claims all its state (unless cfg.IgnoreUnclaimedState). It blocks
// on storage; the Dispatcher calls it before New, off its mailbox, and puts
// the result in Config.Restored. Nil without a savepoint path. Errors wrap
// ErrRestore and name the path and the cause.
func ReadSavepoint(ctx context.Context, cfg Config, jg *jobgraph.JobGraph) (*checkpoint.Restored, error) {
	if cfg.SavepointPath == "" {
		return nil, nil
	}
	loc, md, err := checkpoint.Store{Options: cfg.Storage}.Read(ctx, cfg.SavepointPath)
	if err != nil {
		return nil, fmt.Errorf("%w from %s: %w", ErrRestore, cfg.SavepointPath, err)
	}
	if err := checkpoint.ValidateRestore(md, loc, jg, cfg.IgnoreUnclaimedState); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRestore, err)
	}
	return &checkpoint.Restored{ID: md.CheckpointId, Location: loc, Metadata: md,
		Savepoint: md.Type != pb.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT}, nil
}

// checkpointConfig fills the zero fields of c with Flink's defaults.
func checkpointConfig(c checkpoint.Config) checkpoint.Config {
	d := checkpoint.DefaultConfig()
	if c.Timeout == 0 {
		c.Timeout = d.Timeout
	}
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = d.MaxConcurrent
	}
	if c.NumRetained == 0 {
		c.NumRetained = d.NumRetained
	}
	if c.Retention == "" {
		c.Retention = d.Retention
	}
	return c
}

// startCheckpointing builds the coordinator at Start, so its wall clock
// matches the JobMaster's logical time.
func (jm *JobMaster) startCheckpointing() {
	cfg := jm.ckCfg
	cfg.StartTime = jm.start
	cfg.Rand = jm.rnd.Uint64
	c, err := checkpoint.New(cfg, jm.jg, jm.cfg.Restored)
	if err != nil { // validated in New
		panic(err)
	}
	jm.ck = c
	jm.ckWake = jm.clk.AfterFunc(time.Hour, func() { jm.mb.Post(jm.checkpointTick) })
	jm.ckWake.Stop()
	jm.publishCheckpointStats()
}

func (jm *JobMaster) checkpointingActive() bool {
	return jm.ck != nil && !jm.ckEnded && (jm.ckCfg.Enabled() || jm.ckSavepoints > 0)
}

// checkpointTasksChanged notes that task states may have changed; the
// coordinator hears of it once per mailbox turn at most.
func (jm *JobMaster) checkpointTasksChanged() {
	if !jm.checkpointingActive() {
		return
	}
	jm.ckDirty = true
	if jm.ckSyncPosted {
		return
	}
	jm.ckSyncPosted = true
	jm.mb.Post(func() {
		jm.ckSyncPosted = false
		jm.syncCheckpointTasks()
	})
}

func (jm *JobMaster) syncCheckpointTasks() {
	if !jm.ckDirty || jm.ck == nil || jm.ckEnded {
		return
	}
	jm.ckDirty = false
	g := jm.sched.Graph()
	tasks := make([]checkpoint.Task, len(g.Vertices))
	for i := range g.Vertices {
		tasks[i] = checkpoint.Task{Attempt: g.AttemptID(eg.VertexIndex(i)), State: g.Vertices[i].Current.State}
	}
	jm.stepCheckpoint(checkpoint.TasksChanged{Tasks: tasks})
}

func (jm *JobMaster) checkpointTick() {
	if jm.ck == nil || jm.ckEnded {
		return
	}
	jm.ckDirty = true
	jm.syncCheckpointTasks()
	jm.stepCheckpoint(checkpoint.Tick{})
}

// checkpointJobStatus feeds the coordinator the job status changes of a
// scheduler Ready: a failover aborts pending checkpoints, the end discards.
func (jm *JobMaster) checkpointJobStatus(changes []scheduler.JobStatusChange) {
	if jm.ck == nil || jm.ckEnded {
		return
	}
	for _, c := range changes {
		switch c.To {
		case scheduler.JobRestarting, scheduler.JobFailing, scheduler.JobCancelling:
			jm.stepCheckpoint(checkpoint.Failover{Cause: c.Cause})
		case scheduler.JobFinished, scheduler.JobCanceled, scheduler.JobFailed:
			st := map[scheduler.JobStatus]checkpoint.JobEndStatus{scheduler.JobFinished: checkpoint.JobFinished,
				scheduler.JobCanceled: checkpoint.JobCanceled, scheduler.JobFailed: checkpoint.JobFailed}[c.To]
			jm.stepCheckpoint(checkpoint.JobEnded{Status: st})
			jm.ckEnded = true
			jm.ckWake.Stop()
		}
	}
}

// attachRestore gives a deployment the state to restore: the latest
// completed checkpoint, or the savepoint the job started from.
// It reports whether a redeployment (an attempt after the first)
// restores state.
func (jm *JobMaster) attachRestore(d scheduler.Deployment) bool {
	if jm.ck == nil || d.Descriptor.TaskRestore != nil {
		return false
	}
	a := d.Descriptor.GetAttempt()
	d.Descriptor.TaskRestore = jm.ck.TaskRestore(jm.jg.Vertex(jobgraph.VertexID(a.GetJobVertexId())), int(a.GetSubtaskIndex()))
	return d.Descriptor.TaskRestore != nil && a.GetAttemptNumber() > 0
}

// recordRestore counts a failover's restore in the checkpoint statistics.
func (jm *JobMaster) recordRestore() {
	jm.ck.RecordRestore()
	jm.publishCheckpointStats()
}

func (jm *JobMaster) stepCheckpoint(ev checkpoint.Event) {
	if err := jm.ck.Step(jm.now(), ev); err != nil {
		jm.log.Debug().Err(err).Str("event", fmt.Sprintf("%T", ev)).Msg("checkpoint event rejected")
	}
	r := jm.ck.Ready()
	jm.executeCheckpoint(&r)
	jm.publishCheckpointStats()
}

func (jm *JobMaster) executeCheckpoint(r *checkpoint.Ready) {
	jm.trigger(r.Triggers)
	session := "" // the fencing token: a TaskManager refuses a deposed leader's notices
	if h := jm.cfg.HA; h != nil {
		session = h.Session.String()
	}
	for _, n := range r.Notifications {
		jm.coordinatorsCompleted(n.ID, n.Complete)
		for _, a := range n.Attempts {
			req := &pb.NotifyCheckpointRequest{JobId: jm.jobID, Attempt: attemptProto(a), CheckpointId: n.ID, Complete: n.Complete,
				LastCompletedCheckpointId: n.LastCompleted, LeaderSessionId: session}
			jm.sendToTask(a, fmt.Sprintf("NotifyCheckpoint %d %s", n.ID, a), func(ctx context.Context, c pb.TaskExecutorServiceClient) error {
				_, err := c.NotifyCheckpoint(ctx, req)
				return err
			})
		}
	}
	for _, w := range r.WriteMetadata {
		w := w
		jm.addCoordinatorStates(w.Metadata)
		jm.io(func(ctx context.Context) error {
			return jm.writeMetadata(ctx, w.Location, w.Metadata)
		}, func(err error) {
			if err == nil {
				err = jm.recordCompleted(w)
			}
			if err == nil {
				jm.log.Info().Int64("checkpoint_id", w.ID).Str("location", w.Location).Msg("checkpoint completed")
			} else {
				jm.log.Warn().Err(err).Int64("checkpoint_id", w.ID).Msg("writing checkpoint metadata failed")
			}
			if jm.ck != nil {
				jm.stepCheckpoint(checkpoint.MetadataWritten{ID: w.ID, Err: err})
			}
		})
	}
	for _, d := range r.Discards {
		d := d
		jm.io(func(ctx context.Context) error { return jm.ckStore.Discard(ctx, d) }, func(err error) {
			if err != nil {
				jm.log.Warn().Err(err).Str("location", d.Location).Strs("files", d.Files).Msg("discarding checkpoint state failed")
			}
		})
	}
	if len(r.Savepoints) > 0 {
		jm.ckMu.Lock()
		for _, s := range r.Savepoints {
			jm.savepoints[s.RequestID] = SavepointStatus{Done: true, ID: s.ID, Location: s.Location, Err: s.Err}
			jm.ckSavepoints--
			ev := jm.log.Info()
			if s.Err != nil {
				ev = jm.log.Warn().Err(s.Err)
			}
			ev.Str("request_id", s.RequestID).Str("location", s.Location).Msg("savepoint done")
		}
		jm.ckMu.Unlock()
	}
	if r.HasWakeAt && !jm.ckEnded {
		jm.ckWake.Reset(max(0, r.WakeAt-jm.now()))
	} else {
		jm.ckWake.Stop()
	}
	if r.FailJob != nil {
		jm.log.Warn().Err(r.FailJob).Msg("failing the job: too many checkpoint failures")
		jm.feed(scheduler.FailJob{Cause: r.FailJob})
	}
}

// trigger sends the checkpoint triggers to their tasks. With HA, the
// job's CheckpointIDCounter first moves past their ids (fenced): a later
// leader never reuses an id a task saw, and a deposed leader triggers
// nothing; a checkpoint whose id could not be recorded is declined.
func (jm *JobMaster) trigger(triggers []checkpoint.Trigger) {
	if len(triggers) == 0 {
		return
	}
	if h := jm.cfg.HA; h != nil {
		next := triggers[len(triggers)-1].ID + 1
		jm.io(func(ctx context.Context) error { return h.IDs.SetCount(ctx, h.Session, next) }, func(err error) {
			if err == nil {
				jm.sendTriggers(triggers)
				return
			}
			jm.log.Warn().Err(err).Int64("next_checkpoint_id", next).Msg("recording the checkpoint id failed; declining the checkpoint")
			for _, t := range triggers {
				if len(t.Attempts) > 0 && jm.ck != nil {
					jm.stepCheckpoint(checkpoint.Decline{Attempt: t.Attempts[0], ID: t.ID, Reason: err})
				}
			}
		})
		return
	}
	jm.sendTriggers(triggers)
}

func (jm *JobMaster) sendTriggers(triggers []checkpoint.Trigger) {
	for _, t := range triggers {
		jm.coordinatorsCheckpoint(t.ID)
		jm.log.Info().Int64("checkpoint_id", t.ID).Str("type", t.Options.Type.String()).Str("location", t.Options.TargetLocation).
			Int("trigger_tasks", len(t.Attempts)).Msg("triggering checkpoint")
		for _, a := range t.Attempts {
			req := &pb.TriggerCheckpointRequest{JobId: jm.jobID, Attempt: attemptProto(a), CheckpointId: t.ID, TimestampMs: t.TimestampMs, Options: t.Options}
			jm.sendToTask(a, fmt.Sprintf("TriggerCheckpoint %d %s", t.ID, a), func(ctx context.Context, c pb.TaskExecutorServiceClient) error {
				_, err := c.TriggerCheckpoint(ctx, req)
				return err
			})
		}
	}
}

// recordCompleted adds a checkpoint whose _metadata is durable to the HA
// CompletedCheckpointStore (fenced) before the coordinator completes it:
// tasks commit their output only after that, so a later leader restores
// from a checkpoint at least as new as any committed output. It runs on
// the mailbox, blocking it for one store write (bounded by RPCTimeout),
// and only while the coordinator still wants the checkpoint: one it
// aborted during the metadata write (a failover) is not recorded, and
// nothing can abort it between that check and the write, so the store
// never holds an aborted checkpoint, whose directory is discarded.
// Savepoints are not recorded, as in Flink.
func (jm *JobMaster) recordCompleted(w checkpoint.MetadataWrite) error {
	h := jm.cfg.HA
	if h == nil || w.Metadata.GetType() != pb.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT || jm.ck == nil {
		return nil
	}
	if !jm.ck.Writing(w.ID) {
		jm.log.Info().Int64("checkpoint_id", w.ID).Msg("checkpoint aborted during its metadata write; not recorded in the HA store")
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), jm.cfg.RPCTimeout)
	defer cancel()
	if _, err := h.Checkpoints.AddCheckpoint(ctx, h.Session, ha.CompletedCheckpoint{ID: w.ID, Location: w.Location, Timestamp: time.Now()}); err != nil {
		return fmt.Errorf("jobmaster: recording checkpoint %d in the HA store: %w", w.ID, err)
	}
	return nil
}

// writeMetadata writes a checkpoint's _metadata (Config.writeMetadata in
// tests). Off the mailbox.
func (jm *JobMaster) writeMetadata(ctx context.Context, location string, md *pb.CheckpointMetadata) error {
	if w := jm.cfg.writeMetadata; w != nil {
		return w(ctx, location, md)
	}
	return jm.ckStore.Write(ctx, location, md)
}

// sendToTask queues a call to the TaskManager running attempt a; nothing
// when it runs nowhere known (the coordinator hears of that).
func (jm *JobMaster) sendToTask(a eg.ExecutionAttemptID, what string, call func(context.Context, pb.TaskExecutorServiceClient) error) {
	g := jm.sched.Graph()
	v, err := g.Lookup(a)
	if err != nil {
		return
	}
	tm := jm.tms[g.Vertices[v].Current.Location.ID]
	if tm == nil {
		return
	}
	c := tm.client
	jm.send(tm.out, outbox.Message{What: what, Call: func(ctx context.Context) error { return call(ctx, c) },
		Done: func(err error) {
			if err != nil {
				jm.log.Debug().Err(err).Str("call", what).Msg("checkpoint call failed")
			}
		}})
}

// io runs storage work off the mailbox (owned by it); done runs on the
// mailbox. The job closes only once it is through.
func (jm *JobMaster) io(work func(context.Context) error, done func(error)) {
	jm.pending++
	mailbox.Go(jm.mb, func(ctx context.Context) (struct{}, error) {
		ctx, cancel := context.WithTimeout(ctx, ioTimeout)
		defer cancel()
		return struct{}{}, work(ctx)
	}, func(_ struct{}, err error) {
		jm.pending--
		done(err)
		jm.maybeClose()
	})
}

func (jm *JobMaster) publishCheckpointStats() {
	s := jm.ck.Stats()
	jm.ckMu.Lock()
	jm.ckStats = s
	jm.ckMu.Unlock()
}

// ---- public API, for the Dispatcher and REST ----

// TriggerSavepoint starts a savepoint into dir (empty: state.savepoints.dir).
// With stop, the job stops after it (stop-with-savepoint): with drain its
// sources end their input first (MAX_WATERMARK), without it they suspend.
// It returns the request ID for SavepointStatus at once; the savepoint
// completes asynchronously. Blocks on the JobMaster's mailbox; fails once
// the job ended.
func (jm *JobMaster) TriggerSavepoint(ctx context.Context, dir string, stop, drain bool) (string, error) {
	typ := pb.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT
	switch {
	case stop && drain:
		typ = pb.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT_TERMINATE
	case stop:
		typ = pb.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT_SUSPEND
	}
	id, err := mailbox.Call(ctx, jm.mb, func() (string, error) {
		if jm.ended || jm.ckEnded || jm.ck == nil {
			return "", fmt.Errorf("%w: job %s is %s", ErrJobEnded, jm.jobID, jm.sched.Status())
		}
		id := randomID(jm.rnd)
		jm.ckMu.Lock()
		jm.savepoints[id] = SavepointStatus{}
		jm.ckSavepoints++
		jm.ckMu.Unlock()
		jm.ckDirty = true
		jm.syncCheckpointTasks()
		jm.stepCheckpoint(checkpoint.TriggerSavepoint{RequestID: id, Dir: dir, Type: typ})
		return id, nil
	})
	if errors.Is(err, mailbox.ErrClosed) {
		return "", fmt.Errorf("%w: job %s", ErrJobEnded, jm.jobID)
	}
	return id, err
}

// SavepointStatus returns a savepoint request's state; false for an
// unknown request. It does not block and works after the job ended.
func (jm *JobMaster) SavepointStatus(requestID string) (SavepointStatus, bool) {
	jm.ckMu.Lock()
	defer jm.ckMu.Unlock()
	s, ok := jm.savepoints[requestID]
	return s, ok
}

// CheckpointStats returns the checkpoint statistics; does not block and
// works after the job ended.
func (jm *JobMaster) CheckpointStats() checkpoint.StatsSnapshot {
	jm.ckMu.Lock()
	defer jm.ckMu.Unlock()
	return jm.ckStats
}

// CheckpointConfig returns the job's checkpointing configuration.
func (jm *JobMaster) CheckpointConfig() checkpoint.Config { return jm.ckCfg }

// ---- called by TaskManagers through the JobMasterService ----

// AcknowledgeCheckpoint records that a task wrote its state for a
// checkpoint. Idempotent; an acknowledgement of an unknown, aborted or
// completed checkpoint is ignored (its state discarded by the coordinator).
func (jm *JobMaster) AcknowledgeCheckpoint(ctx context.Context, req *pb.AcknowledgeCheckpointRequest) (*pb.Ack, error) {
	if req.Attempt == nil {
		return nil, status.Error(codes.InvalidArgument, "jobmaster: checkpoint acknowledgement without an attempt")
	}
	ev := checkpoint.Acknowledge{Attempt: attemptID(req.Attempt), ID: req.CheckpointId, Operators: req.Operators, Metrics: req.Metrics}
	return mailbox.Call(ctx, jm.mb, func() (*pb.Ack, error) {
		if jm.ck != nil {
			jm.syncCheckpointTasks()
			jm.stepCheckpoint(ev)
		}
		return &pb.Ack{}, nil
	})
}

// NotifyEndOfData records that a task ended its data and waits for a
// final checkpoint. Idempotent; ignored for an attempt that is not current.
func (jm *JobMaster) NotifyEndOfData(ctx context.Context, req *pb.NotifyEndOfDataRequest) (*pb.Ack, error) {
	if req.Attempt == nil {
		return nil, status.Error(codes.InvalidArgument, "jobmaster: end-of-data notice without an attempt")
	}
	ev := checkpoint.EndOfData{Attempt: attemptID(req.Attempt)}
	return mailbox.Call(ctx, jm.mb, func() (*pb.Ack, error) {
		if jm.ck != nil {
			jm.log.Debug().Str("attempt", ev.Attempt.String()).Msg("task ended its data")
			jm.syncCheckpointTasks()
			jm.stepCheckpoint(ev)
		}
		return &pb.Ack{}, nil
	})
}

// DeclineCheckpoint aborts a checkpoint a task could not take. Idempotent.
func (jm *JobMaster) DeclineCheckpoint(ctx context.Context, req *pb.DeclineCheckpointRequest) (*pb.Ack, error) {
	if req.Attempt == nil {
		return nil, status.Error(codes.InvalidArgument, "jobmaster: checkpoint decline without an attempt")
	}
	reason := failure.Decode(req.Reason)
	if reason == nil {
		reason = errors.New("no reason given")
	}
	ev := checkpoint.Decline{Attempt: attemptID(req.Attempt), ID: req.CheckpointId, Reason: reason}
	return mailbox.Call(ctx, jm.mb, func() (*pb.Ack, error) {
		if jm.ck != nil {
			jm.syncCheckpointTasks()
			jm.stepCheckpoint(ev)
		}
		return &pb.Ack{}, nil
	})
}
