package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/gofl/gofl/ha"
	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/jobmanager/jobmaster"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/rpc/restapi"
)

// HA is what the Dispatcher of an elected leader works with. Accepted job
// graphs go to the JobGraphStore before the submission is acknowledged; a
// job that reaches a globally terminal state gets a JobResultStore entry,
// then its graph, checkpoint pointers and id counter are removed; its
// JobMaster records checkpoints (jobmaster.CheckpointRecovery). Every
// write carries Session, so a deposed leader's fail.
type HA struct {
	Services ha.Services
	Session  ha.SessionID
}

// cleanupTimeout bounds the HA writes after a job ended.
const cleanupTimeout = time.Minute

// prepareHA refuses a job that already reached a terminal state under any
// leader (FLINK-39704), stores a new job's graph, and gives the JobMaster
// the job's checkpoint store and id counter; a recovered job restores
// from its latest completed checkpoint. Blocks on ZooKeeper and storage.
func (d *Dispatcher) prepareHA(ctx context.Context, jg *jobgraph.JobGraph, jmCfg *jobmaster.Config, recovered bool) error {
	h := d.cfg.HA
	done, err := h.Services.JobResultStore().HasJobResultEntry(ctx, jg.JobID)
	if err != nil {
		return fmt.Errorf("dispatcher: job result store: %w", err)
	}
	if done {
		return fmt.Errorf("%w: %s already reached a terminal state", restapi.ErrDuplicateJob, jg.JobID)
	}
	jmCfg.Checkpoint.NumRetained = max(jmCfg.Checkpoint.NumRetained, 1)
	store, err := h.Services.CompletedCheckpointStore(ctx, jg.JobID, jmCfg.Checkpoint.NumRetained)
	if err != nil {
		return fmt.Errorf("dispatcher: completed checkpoint store of %s: %w", jg.JobID, err)
	}
	ids := h.Services.CheckpointIDCounter(jg.JobID)
	first, err := ids.Get(ctx)
	if err != nil && !errors.Is(err, ha.ErrNotFound) {
		return fmt.Errorf("dispatcher: checkpoint id counter of %s: %w", jg.JobID, err)
	}
	jmCfg.Checkpoint.FirstID = first
	jmCfg.HA = &jobmaster.CheckpointRecovery{Session: h.Session, Checkpoints: store, IDs: ids}
	if recovered {
		if latest, ok := store.Latest(); ok {
			jmCfg.SavepointPath = latest.Location
			d.log.Info().Str("job_id", jg.JobID).Int64("checkpoint_id", latest.ID).Str("location", latest.Location).
				Msg("recovering the job from its latest completed checkpoint")
		}
		return nil
	}
	if d.jobKnown(ctx, jg.JobID) {
		return fmt.Errorf("%w: %s", restapi.ErrDuplicateJob, jg.JobID)
	}
	b, err := proto.Marshal(jobgraph.ToProto(jg))
	if err != nil {
		return err
	}
	if err := h.Services.JobGraphStore().PutJobGraph(ctx, h.Session, jg.JobID, b); err != nil {
		return fmt.Errorf("dispatcher: storing the JobGraph of %s: %w", jg.JobID, err)
	}
	return nil
}

func (d *Dispatcher) jobKnown(ctx context.Context, id string) bool {
	_, err := d.lookup(ctx, id)
	return err == nil
}

// RecoverJobs starts every job in the JobGraphStore that has no entry in
// the JobResultStore, each from its latest completed checkpoint, and
// finishes the cleanup of jobs that ended under a former leader. Called by
// a new leader once, after Run started; blocks on ZooKeeper and storage.
// It returns the recovered job ids and the first error (the other jobs
// are still tried).
func (d *Dispatcher) RecoverJobs(ctx context.Context) ([]string, error) {
	h := d.cfg.HA
	if h == nil {
		return nil, nil
	}
	graphs, results := h.Services.JobGraphStore(), h.Services.JobResultStore()
	ids, err := graphs.JobIDs(ctx)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: listing stored job graphs: %w", err)
	}
	var recovered []string
	var first error
	note := func(err error) {
		if first == nil {
			first = err
		}
		d.log.Error().Err(err).Msg("recovering a job failed")
	}
	for _, id := range ids {
		done, err := results.HasJobResultEntry(ctx, id)
		if err != nil {
			note(fmt.Errorf("dispatcher: job result of %s: %w", id, err))
			continue
		}
		if done {
			d.log.Info().Str("job_id", id).Msg("not recovering a job that reached a terminal state")
			d.cleanupTerminal(ctx, id)
			continue
		}
		b, err := graphs.RecoverJobGraph(ctx, id)
		if err != nil {
			note(fmt.Errorf("dispatcher: JobGraph of %s: %w", id, err))
			continue
		}
		var m pb.JobGraph
		if err := proto.Unmarshal(b, &m); err != nil {
			note(fmt.Errorf("dispatcher: JobGraph of %s: %w", id, err))
			continue
		}
		if _, err := d.submit(ctx, jobgraph.FromProto(&m), true); err != nil {
			note(fmt.Errorf("dispatcher: recovering job %s: %w", id, err))
			continue
		}
		recovered = append(recovered, id)
	}
	dirty, err := results.DirtyResults(ctx)
	if err != nil && first == nil {
		first = fmt.Errorf("dispatcher: dirty job results: %w", err)
	}
	for _, r := range dirty {
		d.cleanupTerminal(ctx, r.JobID)
	}
	return recovered, first
}

// recordTerminal records a job that reached a globally terminal state in
// the JobResultStore, then cleans up its recovery data. Off the mailbox.
func (d *Dispatcher) recordTerminal(id, state string, res *restapi.JobExecutionResult) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	var b []byte
	if res != nil {
		b, _ = json.Marshal(res)
	}
	h := d.cfg.HA
	err := h.Services.JobResultStore().CreateDirtyResult(ctx, h.Session, ha.JobResult{JobID: id, State: state, Result: b})
	if err != nil && !errors.Is(err, ha.ErrExists) {
		// The next leader recovers the job: it ran under a leader that
		// could not record its end.
		d.log.Error().Err(err).Str("job_id", id).Msg("recording the job's terminal state failed")
		return
	}
	d.cleanupTerminal(ctx, id)
}

// cleanupTerminal removes a terminal job's graph, checkpoint pointers and
// id counter, then marks its result clean. Failures are logged; the next
// leader retries (the result stays dirty).
func (d *Dispatcher) cleanupTerminal(ctx context.Context, id string) {
	h := d.cfg.HA
	err := h.Services.JobGraphStore().RemoveJobGraph(ctx, h.Session, id)
	if err == nil {
		var store ha.CompletedCheckpointStore
		if store, err = h.Services.CompletedCheckpointStore(ctx, id, 1); err == nil {
			_, err = store.Clear(ctx, h.Session)
		}
	}
	if err == nil {
		err = h.Services.CheckpointIDCounter(id).Remove(ctx, h.Session)
	}
	if err == nil {
		err = h.Services.JobResultStore().MarkResultAsClean(ctx, h.Session, id)
		if errors.Is(err, ha.ErrNotFound) {
			err = nil
		}
	}
	if err != nil {
		d.log.Warn().Err(err).Str("job_id", id).Msg("cleaning up a terminal job's HA data failed")
	}
}

// TerminalResult reports the terminal state a job reached under any
// leader, from the JobResultStore; ok is false if it has no entry (or
// without high availability). Blocks on storage.
func (d *Dispatcher) TerminalResult(ctx context.Context, id string) (state string, ok bool, err error) {
	h := d.cfg.HA
	if h == nil {
		return "", false, nil
	}
	r, err := h.Services.JobResultStore().GetJobResult(ctx, id)
	if errors.Is(err, ha.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("dispatcher: job result of %s: %w", id, err)
	}
	return r.State, true, nil
}
