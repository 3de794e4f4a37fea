package taskmanager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/ha"
	"github.com/gofl/gofl/internal/backoff"
	"github.com/gofl/gofl/internal/clock"
	"github.com/gofl/gofl/internal/outbox"
	"github.com/gofl/gofl/internal/version"
	"github.com/gofl/gofl/rpc/pb"
)

// jobConnection is the TaskExecutor's connection to one job's JobMaster,
// Flink's JobManagerConnection plus its JobLeaderService registration. It
// exists while the job holds slots (or produced partitions here) and is
// replaced by a fresh one when the JobMaster is lost and the job asks for a
// slot again. Continuations check te.jobs[jobID] == jc to ignore replies
// meant for a closed connection.
type jobConnection struct {
	// registrationID names this connection in RegisterTaskManager and
	// DisconnectTaskManager: a JobMaster ignores the late disconnect of a
	// connection a newer one replaced.
	registrationID string
	jobID          string
	address        string
	client         pb.JobMasterServiceClient
	closer         io.Closer
	// out carries every call to the JobMaster in order: the registration,
	// offers, task state updates, partition losses and the disconnect.
	out *outbox.Outbox
	log zerolog.Logger

	// dataAddr is the job's data address here (TaskRunner.DataAddress);
	// it goes to the JobMaster in the registration, and from there into
	// the shuffle descriptors of what this TaskManager produces.
	dataAddr string

	// leaderSession is the ResourceManager leader session known when the
	// connection was made (nil: none yet, or no high availability): the
	// JobMasters lead with it, so a new leader session means this
	// connection's JobMaster lost its leadership, whatever its address.
	leaderSession *ha.SessionID

	connected   bool
	jobMasterID string
	hbTimeout   time.Duration
	lastSeen    time.Time
	watch       clock.Timer

	offerInFlight bool
	// paused is a registration or offer waiting out the job's retry pause;
	// pausedUntil is when it runs.
	paused      clock.Timer
	pausedUntil time.Time

	// pendingReports counts task state updates and partition-loss reports
	// not yet answered; shutdown waits for them.
	pendingReports int
	// lostRunners are the job's runner incarnations that died: a task of
	// theirs finishing afterwards has lost its partitions already.
	lostRunners map[uint64]error
}

// jobRetry paces the calls to a job's JobMaster after it rejected this
// TaskManager's registration or slot offers. It outlives the job's
// connections: a JobMaster that rejects, and a ResourceManager that
// re-requests the freed slots at once, would otherwise spin through
// connections as fast as the network allows.
type jobRetry struct {
	bo        *backoff.Backoff
	notBefore time.Time
}

func (te *TaskExecutor) newJobOutbox(jobID, address string) *outbox.Outbox {
	return outbox.New("JobMaster "+address+" of job "+jobID, te.mb, outbox.Config{
		CallTimeout: te.cfg.RPCTimeout, Backoff: te.backoffConfig(), Clock: te.clk, Rand: te.rnd.Float64,
		Retryable: func(err error) bool { return !rejected(err) },
	}, te.log)
}

// rejected tells a JobMaster's answer (retrying cannot change it) from a
// failure to reach it.
func rejected(err error) bool {
	switch status.Code(err) {
	case codes.NotFound, codes.InvalidArgument, codes.FailedPrecondition, codes.AlreadyExists,
		codes.PermissionDenied, codes.Unauthenticated, codes.Unimplemented, codes.OutOfRange:
		return true
	}
	return false
}

// connectJob makes sure the job has a JobMaster connection, connecting if
// needed, and offers its unaccepted slots if connected.
func (te *TaskExecutor) connectJob(jobID, address string) error {
	if jc := te.jobs[jobID]; jc != nil {
		if jc.address != address {
			jc.log.Warn().Str("requested_address", address).Msg("slot request names another JobMaster address; keeping the current connection")
		}
		te.offerSlots(jc)
		return nil
	}
	client, closer, err := te.dialJobMaster(address)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "JobMaster address %q: %v", address, err)
	}
	if closer == nil {
		closer = nopCloser{}
	}
	jc := &jobConnection{
		jobID: jobID, address: address, client: client, closer: closer,
		registrationID: randomHex(te.rnd, 8),
		out:            te.newJobOutbox(jobID, address),
		log:            te.log.With().Str("job_id", jobID).Logger(),
		lostRunners:    map[uint64]error{},
		leaderSession:  te.rmSession,
	}
	// The data address is needed now, for the registration; while the
	// job's runner lives it is the address the runner listens on.
	if jc.dataAddr, err = te.exec.DataAddress(jobID); err != nil {
		jc.log.Warn().Err(err).Msg("the job has no data address here")
	}
	te.jobs[jobID] = jc
	te.registerAtJobMaster(jc)
	return nil
}

// pauseForRetry defers fn while the job's retry pause runs and reports
// whether it did.
func (te *TaskExecutor) pauseForRetry(jc *jobConnection, what string, fn func()) bool {
	if jc.paused != nil {
		return true // the pending continuation registers or offers
	}
	r := te.jobRetry[jc.jobID]
	if r == nil {
		return false
	}
	wait := r.notBefore.Sub(te.clk.Now())
	if wait <= 0 {
		return false
	}
	jc.log.Info().Dur("retry_in", wait).Int("rejections", r.bo.Attempts()).
		Msgf("the JobMaster rejected this TaskManager recently; %s after a pause", what)
	jc.pausedUntil = r.notBefore
	jc.paused = te.after(wait, func() {
		if te.jobs[jc.jobID] != jc || te.stopping {
			return
		}
		jc.paused, jc.pausedUntil = nil, time.Time{}
		fn()
	})
	return true
}

// jobRejected counts a rejection by the job's JobMaster (of the
// registration or of offered slots) and starts the next retry pause.
func (te *TaskExecutor) jobRejected(jobID string) {
	now := te.clk.Now()
	for job, r := range te.jobRetry { // forget jobs quiet for a full pause
		if te.jobs[job] == nil && now.Sub(r.notBefore) > MaxRegistrationBackoff {
			delete(te.jobRetry, job)
		}
	}
	r := te.jobRetry[jobID]
	if r == nil {
		r = &jobRetry{bo: te.newBackoff()}
		te.jobRetry[jobID] = r
	}
	r.notBefore = now.Add(r.bo.Next())
}

// registerAtJobMaster registers this TaskManager at the job's JobMaster,
// retrying through the connection's outbox until it answers. A rejection
// gives up the job's slots here.
func (te *TaskExecutor) registerAtJobMaster(jc *jobConnection) {
	if te.stopping || te.jobs[jc.jobID] != jc {
		return
	}
	if te.pauseForRetry(jc, "registering", func() { te.registerAtJobMaster(jc) }) {
		return
	}
	loc := te.location()
	loc.DataAddress = jc.dataAddr
	req := &pb.RegisterTaskManagerRequest{ProtocolVersion: version.ProtocolVersion, JobId: jc.jobID, Location: loc, RegistrationId: jc.registrationID}
	client := jc.client
	var resp *pb.RegisterTaskManagerResponse
	jc.out.Send(outbox.Message{
		What:     "RegisterTaskManager",
		Deadline: -1, // while the connection lasts: its slots time out
		Call: func(ctx context.Context) error {
			r, err := client.RegisterTaskManager(ctx, req)
			resp = r
			return err
		},
		Done: func(err error) {
			if te.stopping || te.jobs[jc.jobID] != jc {
				return
			}
			if err != nil {
				te.jobRejected(jc.jobID)
				if te.jobHasKeptSlots(jc.jobID) {
					// The new leader may not run the job's JobMaster yet:
					// try again after the pause, until the slots time out.
					jc.log.Info().Err(err).Str("job_master", jc.address).Msg("registration at the new leader's JobMaster failed; the kept slots wait")
					te.registerAtJobMaster(jc)
					return
				}
				jc.log.Warn().Err(err).Str("job_master", jc.address).Msg("registration at the JobMaster failed; giving up the job's slots")
				te.jobMasterLost(jc, fmt.Sprintf("registration at JobMaster %s failed: %v", jc.address, err), false)
				return
			}
			timeout := fencingTimeout(time.Duration(resp.HeartbeatTimeoutMs)*time.Millisecond,
				time.Duration(resp.HeartbeatIntervalMs)*time.Millisecond, te.cfg.HeartbeatTimeout)
			jc.connected, jc.jobMasterID, jc.hbTimeout, jc.lastSeen = true, resp.JobMasterId, timeout, te.clk.Now()
			jc.log = jc.log.With().Str("job_master_id", jc.jobMasterID).Logger()
			jc.log.Info().Str("job_master", jc.address).Str("data_address", jc.dataAddr).Dur("heartbeat_timeout", timeout).
				Msg("connected to the JobMaster")
			te.watchJobMaster(jc)
			te.offerSlots(jc)
		},
	})
}

// fencingTimeout is how long the TaskExecutor waits for a JobMaster's
// heartbeat before it stops the job's tasks: one heartbeat interval less
// than the JobMaster's own timeout. The JobMaster last heard from us after
// we last heard from it (its request came first, our answer after), so
// when the two are cut apart this side gives up first, by at least an
// interval, and a subtask never runs here while the JobMaster has already
// started it elsewhere. A timeout too short for that margin is kept whole.
func fencingTimeout(timeout, interval, fallback time.Duration) time.Duration {
	if timeout <= 0 {
		return fallback
	}
	if interval > 0 && timeout-interval >= interval {
		return timeout - interval
	}
	return timeout
}

// watchJobMaster treats the JobMaster as lost once its heartbeats stop for
// the fencing timeout.
func (te *TaskExecutor) watchJobMaster(jc *jobConnection) {
	left := jc.hbTimeout - te.clk.Now().Sub(jc.lastSeen)
	jc.watch = te.after(left, func() {
		if te.stopping || te.jobs[jc.jobID] != jc {
			return
		}
		if silent := te.clk.Now().Sub(jc.lastSeen); silent >= jc.hbTimeout {
			jc.log.Warn().Dur("heartbeat_timeout", jc.hbTimeout).Msg("JobMaster heartbeat timed out")
			te.jobMasterLost(jc, fmt.Sprintf("heartbeat of JobMaster %s timed out after %v", jc.jobMasterID, jc.hbTimeout), true)
			return
		}
		te.watchJobMaster(jc)
	})
}

// offerSlots offers the job's allocated, not yet accepted slots to its
// JobMaster; accepted ones become active, the others are freed and
// reported to the ResourceManager (as Flink does), and the job's next
// registration or offer waits for its retry pause.
func (te *TaskExecutor) offerSlots(jc *jobConnection) {
	if !jc.connected || jc.offerInFlight || te.stopping {
		return
	}
	type offered struct {
		s   *slot
		seq uint64
	}
	var slots []offered
	req := &pb.OfferSlotsRequest{JobId: jc.jobID, ResourceId: te.cfg.ResourceID}
	for _, s := range te.slots {
		if s.jobID == jc.jobID && !s.active && !s.releasing {
			slots = append(slots, offered{s, s.allocSeq})
			req.Slots = append(req.Slots, &pb.SlotOffer{AllocationId: s.allocationID, SlotIndex: int32(s.index)})
		}
	}
	if len(slots) == 0 {
		return
	}
	if te.pauseForRetry(jc, "offering slots", func() { te.offerSlots(jc) }) {
		return
	}
	jc.offerInFlight = true
	client := jc.client
	var resp *pb.OfferSlotsResponse
	jc.out.Send(outbox.Message{
		What:     fmt.Sprintf("OfferSlots (%d slots)", len(req.Slots)),
		Deadline: te.cfg.SlotTimeout, // the slots time out then anyway
		Call: func(ctx context.Context) error {
			r, err := client.OfferSlots(ctx, req)
			resp = r
			return err
		},
		Done: func(err error) {
			if te.jobs[jc.jobID] != jc {
				return
			}
			jc.offerInFlight = false
			accepted := map[string]bool{}
			if err != nil {
				jc.log.Warn().Err(err).Int("slots", len(slots)).Msg("offering slots to the JobMaster failed; freeing them")
			} else {
				for _, a := range resp.Accepted {
					accepted[a] = true
				}
			}
			freed := 0
			for _, o := range slots {
				s := o.s
				if s.allocSeq != o.seq || s.free() || s.active || s.releasing {
					continue // freed or re-allocated meanwhile
				}
				if accepted[s.allocationID] {
					s.active, s.kept = true, false
					jc.log.Info().Str("allocation_id", s.allocationID).Int("slot", s.index).Msg("JobMaster accepted slot")
					continue
				}
				if s.kept {
					// The recovered JobMaster may not ask for slots yet: offered
					// again after the pause, until the slot times out.
					jc.log.Info().Str("allocation_id", s.allocationID).Int("slot", s.index).Err(err).Msg("JobMaster did not take the kept slot yet")
					continue
				}
				if err == nil {
					jc.log.Info().Str("allocation_id", s.allocationID).Int("slot", s.index).Msg("JobMaster rejected slot")
				}
				te.freeSlot(s, "offer not accepted by the JobMaster", nil)
				freed++
			}
			if err != nil || len(accepted) < len(slots) {
				// Also paces the offers of kept slots.
				te.jobRejected(jc.jobID)
			} else {
				delete(te.jobRetry, jc.jobID) // the JobMaster takes what it is offered
			}
			if freed > 0 {
				te.sendSlotReport()
				if te.closeJobIfIdle(jc.jobID) {
					return
				}
			}
			te.offerSlots(jc) // slots allocated while the offer was in flight
		},
	})
}

// reportDeadline is how long a report may take before the JobMaster counts
// as lost.
func (te *TaskExecutor) reportDeadline(jc *jobConnection) time.Duration {
	if te.cfg.ReportDeadline > 0 {
		return te.cfg.ReportDeadline
	}
	if jc.hbTimeout > 0 {
		return jc.hbTimeout
	}
	return te.cfg.HeartbeatTimeout
}

// sendReport sends a report (a task state update, lost partitions) to the
// job's JobMaster behind everything sent to it before. An answer
// rejecting it drops it; one not delivered by the report deadline loses
// the JobMaster.
func (te *TaskExecutor) sendReport(jc *jobConnection, what string, log zerolog.Logger, call func(context.Context, pb.JobMasterServiceClient) error) {
	client := jc.client
	jc.pendingReports++
	jc.out.Send(outbox.Message{
		What:     what,
		Deadline: te.reportDeadline(jc),
		Call:     func(ctx context.Context) error { return call(ctx, client) },
		Done: func(err error) {
			jc.pendingReports--
			defer te.maybeFinishShutdown()
			if err == nil || te.jobs[jc.jobID] != jc || errors.Is(err, outbox.ErrClosed) {
				return
			}
			switch {
			case errors.Is(err, outbox.ErrDeadline):
				log.Warn().Err(err).Msg("report not delivered in time; JobMaster lost")
				te.jobMasterLost(jc, fmt.Sprintf("%s was not delivered within %v: %v", what, te.reportDeadline(jc), err), true)
			case status.Code(err) == codes.NotFound:
				log.Info().Err(err).Msg("JobMaster does not know the task attempt; report dropped")
			default:
				// The JobMaster answered: retrying cannot change its answer,
				// and it is no reason to think it lost.
				log.Warn().Err(err).Msg("JobMaster rejected the report; dropped")
			}
		},
	})
}

// enqueueReport sends a task state update to the job's JobMaster. Updates
// of one job never overtake each other. Updates for a job without a
// connection are dropped: its JobMaster is gone and will not hear of the
// attempt again.
func (te *TaskExecutor) enqueueReport(req *pb.UpdateTaskExecutionStateRequest) {
	jc := te.jobs[req.JobId]
	key := attemptKey(req.Attempt)
	if jc == nil {
		te.log.Debug().Str("job_id", req.JobId).Str("attempt", key).Str("state", req.State).
			Msg("no JobMaster connection; task state update dropped")
		return
	}
	log := jc.log.With().Str("attempt", key).Str("state", req.State).Logger()
	te.sendReport(jc, "UpdateTaskExecutionState "+key+" "+req.State, log, func(ctx context.Context, c pb.JobMasterServiceClient) error {
		_, err := c.UpdateTaskExecutionState(ctx, req)
		return err
	})
}

// jobMasterLeaderLost is jobMasterLost for a JobMaster that lost its
// leadership: the job's slots are kept (keepSlot) instead of freed, for
// the new leader's JobMaster of the job.
func (te *TaskExecutor) jobMasterLeaderLost(jc *jobConnection, cause string) {
	if te.jobs[jc.jobID] != jc {
		return
	}
	te.closeJobConnection(jc, cause, false, true, nil)
	failure := errors.New(cause)
	for _, t := range te.sortedTasks() {
		if t.jobID == jc.jobID {
			te.cancelTask(t, failure)
		}
	}
	for _, s := range te.slots {
		if s.jobID == jc.jobID {
			te.keepSlot(s)
		}
	}
	if n := len(te.partitions[jc.jobID]); n > 0 {
		jc.log.Info().Int("partitions", n).Msg("releasing the job's partitions")
		delete(te.partitions, jc.jobID)
	}
	te.sendSlotReport()
}

// jobMasterLost closes the job's connection, cancels its tasks, frees its
// slots, drops its partitions and reports the slots to the
// ResourceManager. A later RequestSlot for the job connects afresh.
func (te *TaskExecutor) jobMasterLost(jc *jobConnection, cause string, notify bool) {
	if te.jobs[jc.jobID] != jc {
		return
	}
	te.closeJobConnection(jc, cause, notify, true, nil)
	for _, s := range te.slots {
		if s.jobID == jc.jobID {
			te.freeSlot(s, cause, errors.New(cause))
		}
	}
	if n := len(te.partitions[jc.jobID]); n > 0 {
		jc.log.Info().Int("partitions", n).Msg("releasing the job's partitions")
		delete(te.partitions, jc.jobID)
	}
	te.sendSlotReport()
	te.maybeFinishShutdown()
}

// closeJobIfIdle closes the job's connection once it holds no slot and no
// partition here; it reports whether it did.
func (te *TaskExecutor) closeJobIfIdle(jobID string) bool {
	jc := te.jobs[jobID]
	if jc == nil || te.jobHasSlots(jobID) || len(te.partitions[jobID]) > 0 {
		return false
	}
	te.closeJobConnection(jc, "no more slots of the job on this TaskManager", true, false, nil)
	return true
}

// closeJobConnection forgets the connection, releases the job's runner and
// closes the connection, first telling a connected JobMaster (if notify)
// with DisconnectTaskManager. For a lost JobMaster (lost) what is still
// queued for it is dropped; otherwise the disconnect follows it. done, if
// not nil, runs on the mailbox when that is over.
func (te *TaskExecutor) closeJobConnection(jc *jobConnection, cause string, notify, lost bool, done func()) {
	if te.jobs[jc.jobID] == jc {
		delete(te.jobs, jc.jobID)
	}
	for _, tm := range []clock.Timer{jc.watch, jc.paused} {
		if tm != nil {
			tm.Stop()
		}
	}
	te.exec.ReleaseJob(jc.jobID)
	jc.log.Info().Str("cause", cause).Msg("closing the JobMaster connection")
	te.closing[jc] = struct{}{} // Run closes it if the mailbox stops first
	finish := func() {
		delete(te.closing, jc)
		jc.closer.Close()
		if done != nil {
			done()
		}
	}
	out := jc.out
	if lost {
		out.Close(errors.New(cause))
	}
	if !notify || !jc.connected {
		out.Close(errors.New(cause))
		finish()
		return
	}
	if lost { // a fresh outbox, so the disconnect does not wait for the dropped calls
		out = te.newJobOutbox(jc.jobID, jc.address)
	}
	req := &pb.DisconnectTaskManagerRequest{JobId: jc.jobID, ResourceId: te.cfg.ResourceID, Cause: cause, RegistrationId: jc.registrationID}
	client := jc.client
	out.Send(outbox.Message{
		What:     "DisconnectTaskManager",
		Deadline: te.cfg.RPCTimeout,
		Call: func(ctx context.Context) error {
			_, err := client.DisconnectTaskManager(ctx, req)
			return err
		},
		Done: func(err error) {
			if err != nil {
				jc.log.Debug().Err(err).Msg("DisconnectTaskManager failed")
			}
			out.Close(errors.New(cause))
			finish()
		},
	})
}

// disconnectJobManager is DisconnectJobManager on the mailbox.
func (te *TaskExecutor) disconnectJobManager(req *pb.DisconnectJobManagerRequest) error {
	jc := te.jobs[req.JobId]
	if jc == nil {
		te.log.Debug().Str("job_id", req.JobId).Str("cause", req.Cause).Msg("DisconnectJobManager for a job not connected here")
		return nil
	}
	jc.log.Info().Str("cause", req.Cause).Msg("JobMaster disconnected")
	te.jobMasterLost(jc, "JobMaster disconnected: "+req.Cause, false)
	return nil
}

// jobMasterHeartbeat is HeartbeatFromJobManager on the mailbox: the
// TaskManager's actual state of the job, which the JobMaster reconciles
// with what it expects.
func (te *TaskExecutor) jobMasterHeartbeat(req *pb.HeartbeatRequest) (*pb.TaskManagerHeartbeatResponse, error) {
	jc := te.jobs[req.JobId]
	if jc == nil {
		return nil, status.Errorf(codes.NotFound, "no connection to the JobMaster of job %s", req.JobId)
	}
	if !jc.connected { // its RegisterTaskManager reply is still on the way
		return &pb.TaskManagerHeartbeatResponse{SlotReport: te.slotReport()}, nil
	}
	if req.SenderId != "" && req.SenderId != jc.jobMasterID {
		return nil, status.Errorf(codes.FailedPrecondition, "heartbeat from JobMaster %s, but job %s is connected to JobMaster %s", req.SenderId, req.JobId, jc.jobMasterID)
	}
	jc.lastSeen = te.clk.Now()
	resp := &pb.TaskManagerHeartbeatResponse{SlotReport: te.slotReport()}
	for _, t := range te.sortedTasks() {
		if t.jobID == req.JobId {
			resp.Running = append(resp.Running, t.attempt)
			resp.Metrics = append(resp.Metrics, te.taskMetrics(t))
		}
	}
	resp.Partitions = te.heldPartitions(req.JobId)
	return resp, nil
}

func (te *TaskExecutor) sortedJobs() []*jobConnection {
	out := make([]*jobConnection, 0, len(te.jobs))
	for _, jc := range te.jobs {
		out = append(out, jc)
	}
	slices.SortFunc(out, func(a, b *jobConnection) int {
		switch {
		case a.jobID < b.jobID:
			return -1
		case a.jobID > b.jobID:
			return 1
		}
		return 0
	})
	return out
}
