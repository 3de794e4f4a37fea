package scheduler

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/jobmanager/failover"
)

// What a TaskManager runs and holds is reconciled with what the scheduler
// expects there (Flink's ExecutionDeploymentReconciler and the partition
// tracker's view of a TaskManager): deployments are remembered once their
// TaskManager acknowledged them, and every report is compared in full.

// ackEntry is one acknowledged deployment on a TaskManager.
type ackEntry struct {
	attempt int32
	// at is the time from which the TaskManager's reports must account for
	// the attempt: when its deployment was acknowledged, or when it
	// finished (then for its partitions).
	at time.Duration
	// missingSince is the RequestedAt of the first of the reports in a row
	// that missed the attempt; valid while missing.
	missingSince time.Duration
	missing      bool
}

// maxNamed bounds the attempts or partitions a failure cause names.
const maxNamed = 5

func (s *Scheduler) deploymentAcknowledged(id eg.ExecutionAttemptID) {
	v, err := s.g.Lookup(id)
	if err != nil {
		return // an older attempt's late answer
	}
	ex := &s.g.Vertices[v].Current
	switch ex.State {
	case eg.Deploying, eg.Initializing, eg.Running, eg.Canceling, eg.Finished:
	default:
		return
	}
	if s.acks == nil {
		s.acks = map[string]map[eg.VertexIndex]*ackEntry{}
	}
	m := s.acks[ex.Location.ID]
	if m == nil {
		m = map[eg.VertexIndex]*ackEntry{}
		s.acks[ex.Location.ID] = m
	}
	m[v] = &ackEntry{attempt: ex.Attempt, at: s.now}
}

// ackFinished notes when an acknowledged attempt finished: from then on
// its TaskManager must report the attempt's partitions.
func (s *Scheduler) ackFinished(v eg.VertexIndex) {
	if s.acks == nil {
		return
	}
	ex := &s.g.Vertices[v].Current
	if e := s.acks[ex.Location.ID][v]; e != nil && e.attempt == ex.Attempt {
		e.at, e.missing = s.now, false
	}
}

// deploymentFailed fails the attempt and cancels it on its TaskManager,
// which may have started it although its answer was lost: no orphan may
// keep its slot.
func (s *Scheduler) deploymentFailed(e DeploymentFailed) error {
	loc := e.TaskManager
	v, err := s.g.Lookup(e.Attempt)
	if err == nil && loc.ID == "" {
		loc = s.g.Vertices[v].Current.Location
	}
	cause := failover.EnvironmentError(fmt.Errorf("deploying %s: %w", e.Attempt, e.Cause))
	if e.OutcomeUnknown && err == nil {
		switch s.g.Vertices[v].Current.State {
		case eg.Deploying, eg.Initializing, eg.Running:
			// The restart cancels it (CANCELING) and waits until it is
			// known to have stopped.
			s.g.Vertices[v].Current.Failure = cause
			s.handleTaskFailures([]eg.VertexIndex{v}, nil, cause)
			return nil
		case eg.Canceling:
			return nil // being cancelled already: it ends once that is confirmed
		}
	}
	if loc.ID != "" && (err == nil || errors.Is(err, eg.ErrStaleAttempt)) {
		s.ready.Cancellations = append(s.ready.Cancellations, Cancellation{TaskManager: loc, Attempt: e.Attempt})
	}
	return s.updateTaskState(e.Attempt, eg.Failed, cause)
}

func (s *Scheduler) taskManagerLost(tm string, cause error) {
	delete(s.acks, tm)
	delete(s.reportsPartitions, tm)
	// Forget the TaskManager's partitions first, so failover sees them gone.
	lost := s.tracker.taskManagerLost(tm)
	victims := s.pool.taskManagerLost(tm)
	if len(victims) == 0 && len(lost) == 0 {
		return
	}
	s.failAndRerunLost(victims, lost, failover.EnvironmentError(fmt.Errorf("%w: %s: %w", ErrTaskManagerLost, tm, orUnknown(cause))))
}

func (s *Scheduler) partitionsLost(e PartitionsLost) {
	var lost []eg.PartitionIndex
	for _, id := range e.Partitions {
		p, ok := s.g.LookupPartition(id)
		if !ok || !s.tracker.heldBy(p, e.TaskManagerID) || s.g.PartitionID(p) != id {
			continue // an older attempt's, released, or already known lost
		}
		s.tracker.forget(p)
		lost = append(lost, p)
	}
	if len(lost) == 0 {
		return
	}
	slices.Sort(lost)
	lost = slices.Compact(lost)
	s.failAndRerunLost(nil, lost, failover.EnvironmentError(fmt.Errorf("%w: TaskManager %s lost %s: %w",
		ErrPartitionsLost, e.TaskManagerID, s.namePartitions(lost), orUnknown(e.Cause))))
}

// failAndRerunLost fails the executions in victims and reruns the producers
// of the lost partitions (no longer tracked) with them, as one failure:
// a finished producer restarts with every region consuming its output, a
// producer still running fails.
func (s *Scheduler) failAndRerunLost(victims []eg.VertexIndex, lost []eg.PartitionIndex, cause error) {
	var rerun []eg.VertexIndex
	for _, p := range lost {
		v := s.g.ProducerOf(p)
		switch st := s.g.Vertices[v].Current.State; {
		case st == eg.Finished:
			if s.status == JobRunning || s.status == JobRestarting {
				rerun = append(rerun, v)
			}
		case !st.IsTerminal():
			victims = append(victims, v)
		}
	}
	slices.Sort(victims)
	victims = slices.Compact(victims)
	slices.Sort(rerun)
	rerun = slices.Compact(rerun)
	s.failAndRerun(victims, rerun, cause)
}

// reconcile compares a TaskManager's report with what the scheduler expects
// there; see TaskManagerReport.
func (s *Scheduler) reconcile(r TaskManagerReport) {
	if s.status.IsGloballyTerminal() {
		return
	}
	tm := r.TaskManagerID
	if len(r.Partitions) > 0 && !s.reportsPartitions[tm] {
		if s.reportsPartitions == nil {
			s.reportsPartitions = map[string]bool{}
		}
		s.reportsPartitions[tm] = true
	}
	checkPartitions := s.reportsPartitions[tm]
	running := make(map[eg.ExecutionAttemptID]struct{}, len(r.Running))
	for _, id := range r.Running {
		running[id] = struct{}{}
		if !s.wanted(tm, id) {
			s.ready.Cancellations = append(s.ready.Cancellations, Cancellation{TaskManager: s.pool.location(tm), Attempt: id})
		}
	}
	var missing []eg.VertexIndex
	var lost []eg.PartitionIndex
	var held map[eg.ResultPartitionID]struct{}
	var buf [4]eg.PartitionIndex
	m := s.acks[tm]
	for v, e := range m {
		ex := &s.g.Vertices[v].Current
		if e.attempt != ex.Attempt || ex.Location.ID != tm {
			delete(m, v) // restarted since
			continue
		}
		switch ex.State {
		case eg.Failed, eg.Canceled:
			delete(m, v)
		case eg.Finished:
			tracked, gone := 0, len(lost)
			for _, p := range s.g.ProducedPartitions(buf[:0], v) {
				if !s.tracker.heldBy(p, tm) {
					continue
				}
				tracked++
				if e.at >= r.RequestedAt || !checkPartitions {
					continue // finished after the report was asked for
				}
				if held == nil {
					held = make(map[eg.ResultPartitionID]struct{}, len(r.Partitions))
					for _, id := range r.Partitions {
						held[id] = struct{}{}
					}
				}
				if _, ok := held[s.g.PartitionID(p)]; !ok {
					lost = append(lost, p)
				}
			}
			switch {
			case tracked == 0:
				delete(m, v) // nothing left to hold there
			case len(lost) == gone:
				e.missing = false
			case s.missingTooLong(e, r.RequestedAt):
			default:
				lost = lost[:gone] // not yet
			}
		default: // DEPLOYING, INITIALIZING, RUNNING, CANCELING
			if _, ok := running[s.g.AttemptID(v)]; ok {
				e.missing = false
				continue
			}
			if e.at >= r.RequestedAt {
				continue // acknowledged after the report was asked for
			}
			if s.missingTooLong(e, r.RequestedAt) {
				missing = append(missing, v)
			}
		}
	}
	if len(missing) == 0 && len(lost) == 0 {
		return
	}
	slices.Sort(missing)
	slices.Sort(lost)
	for _, p := range lost {
		s.tracker.forget(p)
	}
	var why []string
	if len(missing) > 0 {
		why = append(why, fmt.Sprintf("%v: TaskManager %s does not run %s", ErrTaskMissing, tm, s.nameAttempts(missing)))
	}
	if len(lost) > 0 {
		why = append(why, fmt.Sprintf("%v: TaskManager %s no longer holds %s", ErrPartitionsLost, tm, s.namePartitions(lost)))
	}
	cause := &reconcileError{msg: strings.Join(why, "; "), missing: len(missing) > 0, lost: len(lost) > 0}
	s.failAndRerunLost(missing, lost, failover.EnvironmentError(cause))
}

// missingTooLong notes that a report asked for at requestedAt missed
// (part of) e and reports whether it has been missing for the grace
// period: its final state or a report may still be on the way.
func (s *Scheduler) missingTooLong(e *ackEntry, requestedAt time.Duration) bool {
	if !e.missing {
		e.missing, e.missingSince = true, requestedAt
	}
	return requestedAt-e.missingSince >= s.cfg.MissingTaskGrace
}

// wanted reports whether the scheduler wants attempt id to run on tm: it
// is a current attempt deployed there and not yet terminal. A FINISHED
// one counts too: the report was put together before it finished.
func (s *Scheduler) wanted(tm string, id eg.ExecutionAttemptID) bool {
	v, err := s.g.Lookup(id)
	if err != nil {
		return false // another graph's, an older attempt, or unknown
	}
	ex := &s.g.Vertices[v].Current
	switch ex.State {
	case eg.Deploying, eg.Initializing, eg.Running, eg.Canceling:
		return ex.Location.ID == tm
	case eg.Finished:
		return true
	}
	return false
}

func (s *Scheduler) nameAttempts(vs []eg.VertexIndex) string {
	names := make([]string, 0, min(len(vs), maxNamed))
	for _, v := range vs[:min(len(vs), maxNamed)] {
		names = append(names, s.g.AttemptID(v).String())
	}
	if len(vs) > maxNamed {
		names = append(names, fmt.Sprintf("and %d more", len(vs)-maxNamed))
	}
	return strings.Join(names, ", ")
}

func (s *Scheduler) namePartitions(ps []eg.PartitionIndex) string {
	names := make([]string, 0, min(len(ps), maxNamed))
	for _, p := range ps[:min(len(ps), maxNamed)] {
		names = append(names, s.g.PartitionID(p).String())
	}
	if len(ps) > maxNamed {
		names = append(names, fmt.Sprintf("and %d more", len(ps)-maxNamed))
	}
	return strings.Join(names, ", ")
}

// reconcileError explains a failure found by reconciling a report; it
// matches ErrTaskMissing and ErrPartitionsLost as it says.
type reconcileError struct {
	msg           string
	missing, lost bool
}

func (e *reconcileError) Error() string { return e.msg }
func (e *reconcileError) Is(target error) bool {
	return (target == ErrTaskMissing && e.missing) || (target == ErrPartitionsLost && e.lost)
}

func orUnknown(err error) error {
	if err == nil {
		return errors.New("no cause given")
	}
	return err
}
