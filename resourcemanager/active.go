package resourcemanager

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/internal/mailbox"
	"github.com/gofl/gofl/providers"
	"github.com/gofl/gofl/resourcemanager/gateway"
)

// ErrWorkerStartFailed is the cause given to jobs waiting for slots when an
// active ResourceManager failed to start TaskManagers
// resourcemanager.start-worker.max-attempts times in a row.
var ErrWorkerStartFailed = errors.New("resourcemanager: could not start TaskManagers")

// ResourceAllocationFailureNotifier may be implemented by a
// JobMasterGateway to fail its pending slot requests at once; see
// gateway.ResourceAllocationFailureNotifier.
type ResourceAllocationFailureNotifier = gateway.ResourceAllocationFailureNotifier

// onWorkerEvent is the WorkerDriver's EventHandler: it hands the event to
// the mailbox without blocking on the ResourceManager's state.
func (rm *ResourceManager) onWorkerEvent(ev providers.WorkerEvent) {
	rm.mb.Post(func() { rm.workerEvent(ev) })
}

func (rm *ResourceManager) workerEvent(ev providers.WorkerEvent) {
	now := rm.clk.Now()
	planner := rm.planner
	if planner == nil {
		planner = newWorkerPlanner(workerPlannerConfig{}) // passive: nothing to plan
	}
	switch e := ev.(type) {
	case providers.WorkerStarted:
		planner.started(now, e.WorkerID)
		rm.log.Info().Str("worker_id", e.WorkerID).Str("address", e.Address).Msg("worker started")
		rm.reconcile()
	case providers.WorkerTerminated:
		why := "terminated"
		if e.Cause != nil {
			why = e.Cause.Error()
		}
		delete(rm.releasing, e.WorkerID)
		planner.terminated(now, e.WorkerID, why)
		ev := rm.log.Info()
		if !e.Released {
			ev = rm.log.Warn()
		}
		ev.Str("worker_id", e.WorkerID).Int("exit_status", e.ExitStatus).Bool("released", e.Released).
			Str("cause", why).Msg("worker terminated")
		// Act at once rather than waiting for the heartbeat timeout; the
		// JobMasters hear of it even if its TaskExecutor never registered
		// here, unless they were told when it was unregistered.
		if !rm.dropTaskExecutor(e.WorkerID, "worker terminated: "+why, true) && !rm.told[e.WorkerID] {
			rm.notifyTaskManagerLost(e.WorkerID, fmt.Errorf("%w: %s: worker terminated: %s", ErrTaskManagerLost, e.WorkerID, why))
		}
		delete(rm.told, e.WorkerID) // its ID is not used again
		rm.reconcile()
	}
}

// planWorkers runs the planner after every matching round and carries out
// its decisions; it returns when the planner wants to run again (zero:
// no deadline). Runs on the mailbox.
func (rm *ResourceManager) planWorkers(now time.Time) time.Time {
	for _, id := range rm.planner.startingIDs() {
		if _, _, reported := rm.sm.slotsOf(id); reported {
			rm.planner.ready(now, id)
			rm.log.Info().Str("worker_id", id).Msg("started TaskManager registered its slots")
		}
	}
	a := rm.planner.plan(now, rm.sm.missingSlots(), rm.sm.freeSlots(), rm.sm.totalSlots(), rm.sm.idle)
	released := false
	for _, r := range a.Release {
		released = rm.dropTaskExecutor(r.ID, "released: "+r.Reason, true) || released
		rm.releaseWorker(r.ID, r.Reason)
	}
	if a.Exhausted {
		rm.failWaitingJobs(a.Cause)
	}
	for range a.Request {
		rm.requestWorker()
	}
	if released {
		// Its slots are gone: match again, outside this round.
		rm.mb.Post(rm.reconcile)
	}
	return a.WakeAt
}

func (rm *ResourceManager) requestWorker() {
	driver, spec, timeout := rm.cfg.Workers, rm.cfg.Active.Worker, rm.cfg.Active.RegistrationTimeout
	rm.log.Info().Int("slots", spec.Slots).Msg("requesting a TaskManager from the provider")
	mailbox.Go(rm.mb, func(ctx context.Context) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return driver.RequestWorker(ctx, spec)
	}, func(id string, err error) {
		rm.planner.requestDone(rm.clk.Now(), id, err)
		if err != nil {
			rm.log.Warn().Err(err).Msg("the provider could not start a TaskManager")
		} else {
			rm.log.Info().Str("worker_id", id).Msg("TaskManager requested")
		}
		rm.reconcile()
	})
}

// releaseWorker asks the provider to stop a worker this ResourceManager
// started; other TaskManagers (started by hand) are left alone.
func (rm *ResourceManager) releaseWorker(id, reason string) {
	if rm.planner == nil || !rm.planner.owns(id) || rm.releasing[id] {
		return
	}
	rm.releasing[id] = true
	rm.planner.release(id)
	driver, timeout := rm.cfg.Workers, rm.cfg.RPCTimeout
	rm.log.Info().Str("worker_id", id).Str("reason", reason).Msg("releasing TaskManager")
	mailbox.Go(rm.mb, func(ctx context.Context) (struct{}, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return struct{}{}, driver.ReleaseWorker(ctx, id)
	}, func(_ struct{}, err error) {
		if err != nil && !errors.Is(err, providers.ErrWorkerNotFound) {
			rm.log.Warn().Err(err).Str("worker_id", id).Msg("releasing TaskManager failed")
		}
	})
}

// failWaitingJobs tells every job short of slots that no more TaskManagers
// can be started.
func (rm *ResourceManager) failWaitingJobs(cause string) {
	for _, n := range rm.sm.shortJobs() {
		jm, ok := rm.jms[n.JobID]
		if !ok {
			continue
		}
		err := fmt.Errorf("%w: %d attempts in a row failed (resourcemanager.start-worker.max-attempts); last: %s; job %s requires %d slots and holds %d",
			ErrWorkerStartFailed, rm.cfg.Active.MaxFailedStarts, cause, n.JobID, n.Required, n.Acquired)
		rm.log.Error().Str("job_id", n.JobID).Int("required_slots", n.Required).Int("acquired_slots", n.Acquired).
			Msg(err.Error())
		jm.gw.NotifyNotEnoughResources(n.Acquired)
		if f, ok := jm.gw.(ResourceAllocationFailureNotifier); ok {
			f.NotifyResourceAllocationFailed(err)
		}
	}
}

// ActiveConfigFromConf reads an active ResourceManager's settings from the
// taskmanager.numberOfTaskSlots, slotmanager.*, resourcemanager.* options.
func ActiveConfigFromConf(c *conf.Configuration) ActiveConfig {
	return ActiveConfig{
		Worker:              providers.WorkerSpec{Slots: conf.NumberOfTaskSlots.Get(c)},
		MinSlots:            conf.SlotManagerMinSlots.Get(c),
		IdleTimeout:         conf.ResourceManagerTaskManagerTimeout.Get(c),
		RegistrationTimeout: conf.TaskManagerRegistrationTimeout.Get(c),
		MaxFailedStarts:     conf.StartWorkerMaxAttempts.Get(c),
		RetryInterval:       conf.StartWorkerRetryInterval.Get(c),
		MaxRetryInterval:    conf.StartWorkerMaxRetryInterval.Get(c),
	}
}
