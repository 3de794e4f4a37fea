package taskmanager

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/internal/heartbeat"
	"github.com/gofl/gofl/internal/mailbox"
	"github.com/gofl/gofl/internal/version"
	"github.com/gofl/gofl/rpc/pb"
)

// maxReportAttempts is how often a task state update is tried before the
// JobMaster is considered lost.
const maxReportAttempts = 3

// jobConnection is the TaskExecutor's connection to one job's JobMaster,
// Flink's JobManagerConnection plus its JobLeaderService registration. It
// exists while the job holds slots (or produced partitions here) and is
// replaced by a fresh one when the JobMaster is lost and the job asks for a
// slot again. Continuations check te.jobs[jobID] == jc to ignore replies
// meant for a closed connection.
type jobConnection struct {
	jobID   string
	address string
	cc      *grpc.ClientConn
	client  pb.JobMasterServiceClient
	log     zerolog.Logger

	// dataLis is the job's data port here: the job's runner inherits it and
	// serves its network data plane on it; dataAddr, its advertised
	// address, goes to the JobMaster in the registration (and from there
	// into the shuffle descriptors of what this TaskManager produces). It
	// is closed with the connection; nil if it could not be opened.
	dataLis  *net.TCPListener
	dataAddr string

	connected   bool
	jobMasterID string
	backoff     time.Duration
	monitor     *heartbeat.Monitor[string]

	offerInFlight bool

	// reports is the job's FIFO of task state updates; one is in flight at a
	// time so a task's states never overtake each other.
	reports        []*pb.UpdateTaskExecutionStateRequest
	reporting      bool
	reportFailures int
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
	cc, err := te.dial(address)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "JobMaster address %q: %v", address, err)
	}
	jc := &jobConnection{
		jobID: jobID, address: address, cc: cc, client: pb.NewJobMasterServiceClient(cc),
		log:     te.log.With().Str("job_id", jobID).Logger(),
		backoff: te.cfg.RegistrationBackoff,
	}
	// The data port is opened now, as its address must be in the
	// registration; a job of built-in tasks never uses it.
	if lis, err := te.listenData(); err != nil {
		jc.log.Warn().Err(err).Msg("cannot open a data port for the job; its runner will have none")
	} else {
		_, port, _ := net.SplitHostPort(lis.Addr().String())
		jc.dataLis, jc.dataAddr = lis, net.JoinHostPort(te.cfg.Host, port)
	}
	te.jobs[jobID] = jc
	te.registerAtJobMaster(jc, 1)
	return nil
}

// registerAtJobMaster registers this TaskManager at the job's JobMaster,
// retrying with backoff while the job holds slots here.
func (te *TaskExecutor) registerAtJobMaster(jc *jobConnection, attempt int) {
	if te.stopping || te.jobs[jc.jobID] != jc {
		return
	}
	loc := te.location()
	loc.DataAddress = jc.dataAddr
	req := &pb.RegisterTaskManagerRequest{ProtocolVersion: version.ProtocolVersion, JobId: jc.jobID, Location: loc}
	callRPC(te, func(ctx context.Context) (*pb.RegisterTaskManagerResponse, error) {
		return jc.client.RegisterTaskManager(ctx, req)
	}, func(resp *pb.RegisterTaskManagerResponse, err error) {
		if te.stopping || te.jobs[jc.jobID] != jc {
			return
		}
		if err != nil {
			code := status.Code(err)
			if code == codes.FailedPrecondition || code == codes.NotFound || !te.jobHasSlots(jc.jobID) {
				jc.log.Warn().Err(err).Str("job_master", jc.address).Msg("registration at the JobMaster failed; giving up the job's slots")
				te.jobMasterLost(jc, fmt.Sprintf("registration at JobMaster %s failed: %v", jc.address, err), false)
				return
			}
			delay := jc.backoff
			jc.backoff = min(2*jc.backoff, MaxRegistrationBackoff)
			jc.log.Info().Err(err).Int("registration_attempt", attempt).Dur("retry_in", delay).Str("job_master", jc.address).
				Msg("registration at the JobMaster failed; retrying")
			te.after(delay, func() { te.registerAtJobMaster(jc, attempt+1) })
			return
		}
		timeout := time.Duration(resp.HeartbeatTimeoutMs) * time.Millisecond
		if timeout <= 0 {
			timeout = te.cfg.HeartbeatTimeout
		}
		jc.connected, jc.jobMasterID = true, resp.JobMasterId
		jc.monitor = heartbeat.New[string](timeout)
		jc.monitor.Seen(jc.jobMasterID, time.Now())
		jc.log = jc.log.With().Str("job_master_id", jc.jobMasterID).Logger()
		jc.log.Info().Str("job_master", jc.address).Dur("heartbeat_timeout", timeout).Msg("connected to the JobMaster")
		te.watchJobMaster(jc)
		te.offerSlots(jc)
		te.pumpReports(jc)
	})
}

// watchJobMaster treats the JobMaster as lost once its heartbeats stop for
// the heartbeat timeout.
func (te *TaskExecutor) watchJobMaster(jc *jobConnection) {
	te.after(checkPeriod(jc.monitor.Timeout()), func() {
		if te.stopping || te.jobs[jc.jobID] != jc {
			return
		}
		if len(jc.monitor.Expired(time.Now())) > 0 {
			jc.log.Warn().Dur("heartbeat_timeout", jc.monitor.Timeout()).Msg("JobMaster heartbeat timed out")
			te.jobMasterLost(jc, fmt.Sprintf("heartbeat of JobMaster %s timed out after %v", jc.jobMasterID, jc.monitor.Timeout()), true)
			return
		}
		te.watchJobMaster(jc)
	})
}

// offerSlots offers the job's allocated, not yet accepted slots to its
// JobMaster; accepted ones become active, the others are freed and
// reported to the ResourceManager.
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
	jc.offerInFlight = true
	callRPC(te, func(ctx context.Context) (*pb.OfferSlotsResponse, error) { return jc.client.OfferSlots(ctx, req) },
		func(resp *pb.OfferSlotsResponse, err error) {
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
					s.active = true
					jc.log.Info().Str("allocation_id", s.allocationID).Int("slot", s.index).Msg("JobMaster accepted slot")
					continue
				}
				if err == nil {
					jc.log.Info().Str("allocation_id", s.allocationID).Int("slot", s.index).Msg("JobMaster rejected slot")
				}
				te.freeSlot(s, "offer not accepted by the JobMaster")
				freed++
			}
			if freed > 0 {
				te.sendSlotReport(false)
				if te.closeJobIfIdle(jc.jobID) {
					return
				}
			}
			te.offerSlots(jc) // slots allocated while the offer was in flight
		})
}

// enqueueReport queues a task state update for the job's JobMaster. Updates
// for a job without a connection are dropped: its JobMaster is gone and
// will not hear of the attempt again.
func (te *TaskExecutor) enqueueReport(req *pb.UpdateTaskExecutionStateRequest) {
	jc := te.jobs[req.JobId]
	if jc == nil {
		te.log.Debug().Str("job_id", req.JobId).Str("attempt", attemptKey(req.Attempt)).Str("state", req.State).
			Msg("no JobMaster connection; task state update dropped")
		return
	}
	jc.reports = append(jc.reports, req)
	te.pumpReports(jc)
}

func (te *TaskExecutor) pumpReports(jc *jobConnection) {
	if jc.reporting || !jc.connected || len(jc.reports) == 0 {
		return
	}
	req := jc.reports[0]
	jc.reporting = true
	callRPC(te, func(ctx context.Context) (*pb.Ack, error) { return jc.client.UpdateTaskExecutionState(ctx, req) },
		func(_ *pb.Ack, err error) {
			if te.jobs[jc.jobID] != jc {
				return
			}
			log := jc.log.With().Str("attempt", attemptKey(req.Attempt)).Str("state", req.State).Logger()
			// The JobMaster answered: a rejected update is dropped, not
			// retried (retrying cannot change the answer), and it is no
			// reason to think the JobMaster lost.
			switch status.Code(err) {
			case codes.NotFound:
				log.Info().Err(err).Msg("JobMaster does not know the task attempt; state update dropped")
			case codes.InvalidArgument, codes.FailedPrecondition:
				log.Warn().Err(err).Msg("JobMaster rejected the task state update; dropped")
			}
			if c := status.Code(err); err == nil || c == codes.NotFound || c == codes.InvalidArgument || c == codes.FailedPrecondition {
				jc.reports = jc.reports[1:]
				jc.reporting, jc.reportFailures = false, 0
				te.pumpReports(jc)
				te.maybeFinishShutdown()
				return
			}
			jc.reportFailures++
			if te.stopping {
				log.Warn().Err(err).Msg("task state update failed during shutdown; dropping the job's pending updates")
				jc.reports, jc.reporting = nil, false
				te.maybeFinishShutdown()
				return
			}
			if jc.reportFailures >= maxReportAttempts {
				log.Warn().Err(err).Int("attempts", jc.reportFailures).Msg("task state update failed; JobMaster lost")
				te.jobMasterLost(jc, fmt.Sprintf("updating task state failed %d times: %v", jc.reportFailures, err), true)
				return
			}
			delay := te.cfg.RegistrationBackoff << (jc.reportFailures - 1)
			log.Info().Err(err).Dur("retry_in", delay).Msg("task state update failed; retrying")
			te.after(delay, func() {
				if te.jobs[jc.jobID] == jc {
					jc.reporting = false
					te.pumpReports(jc)
				}
			})
		})
}

// jobMasterLost closes the job's connection, cancels its tasks, frees its
// slots, drops its partitions and reports the slots to the
// ResourceManager. A later RequestSlot for the job connects afresh.
func (te *TaskExecutor) jobMasterLost(jc *jobConnection, cause string, notify bool) {
	if te.jobs[jc.jobID] != jc {
		return
	}
	te.closeJobConnection(jc, cause, notify, nil)
	for _, s := range te.slots {
		if s.jobID == jc.jobID {
			te.freeSlot(s, cause)
		}
	}
	if n := len(te.partitions[jc.jobID]); n > 0 {
		jc.log.Info().Int("partitions", n).Msg("releasing the job's partitions")
		delete(te.partitions, jc.jobID)
	}
	te.sendSlotReport(false)
	te.maybeFinishShutdown()
}

// closeJobIfIdle closes the job's connection once it holds no slot and no
// partition here; it reports whether it did.
func (te *TaskExecutor) closeJobIfIdle(jobID string) bool {
	jc := te.jobs[jobID]
	if jc == nil || te.jobHasSlots(jobID) || len(te.partitions[jobID]) > 0 {
		return false
	}
	te.closeJobConnection(jc, "no more slots of the job on this TaskManager", true, nil)
	return true
}

// closeJobConnection forgets the connection and closes it, first telling a
// connected JobMaster (if notify) with DisconnectTaskManager. done, if not
// nil, runs on the mailbox when that is over.
func (te *TaskExecutor) closeJobConnection(jc *jobConnection, cause string, notify bool, done func()) {
	if te.jobs[jc.jobID] == jc {
		delete(te.jobs, jc.jobID)
	}
	jobID, lis := jc.jobID, jc.dataLis
	jc.dataLis = nil
	mailbox.Go(te.mb, func(context.Context) (struct{}, error) {
		te.runners.stop(jobID)
		if lis != nil {
			lis.Close() // after the runner: a new runner of the job may not get it
		}
		return struct{}{}, nil
	}, func(struct{}, error) {})
	jc.log.Info().Str("cause", cause).Msg("closing the JobMaster connection")
	if !notify || !jc.connected {
		jc.cc.Close()
		if done != nil {
			done()
		}
		return
	}
	req := &pb.DisconnectTaskManagerRequest{JobId: jc.jobID, ResourceId: te.cfg.ResourceID, Cause: cause}
	callRPC(te, func(ctx context.Context) (*pb.Ack, error) {
		defer jc.cc.Close() // here, so it is closed even if the mailbox stopped
		return jc.client.DisconnectTaskManager(ctx, req)
	}, func(_ *pb.Ack, err error) {
		if err != nil {
			jc.log.Debug().Err(err).Msg("DisconnectTaskManager failed")
		}
		if done != nil {
			done()
		}
	})
}

// disconnectJobManager is DisconnectJobManager on the mailbox.
func (te *TaskExecutor) disconnectJobManager(req *pb.DisconnectJobManagerRequest) error {
	jc := te.jobs[req.JobId]
	if jc == nil {
		return nil
	}
	jc.log.Info().Str("cause", req.Cause).Msg("JobMaster disconnected")
	te.jobMasterLost(jc, "JobMaster disconnected: "+req.Cause, false)
	return nil
}
