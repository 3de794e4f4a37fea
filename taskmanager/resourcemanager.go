package taskmanager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/internal/backoff"
	"github.com/gofl/gofl/internal/clock"
	"github.com/gofl/gofl/internal/outbox"
	"github.com/gofl/gofl/internal/tlsconf"
	"github.com/gofl/gofl/internal/version"
	"github.com/gofl/gofl/rpc/pb"
)

// ErrResourceManagerLost is what Run returns when the ResourceManager was
// lost and Config.ExitOnResourceManagerLoss is set.
var ErrResourceManagerLost = errors.New("taskmanager: ResourceManager lost")

// ErrRegistrationTimeout is what Run returns when a registration at the
// ResourceManager did not succeed within Config.RegistrationTimeout.
var ErrRegistrationTimeout = errors.New("taskmanager: registration timeout")

// ErrDeposedLeader is what a checkpoint notice from a JobManager that lost
// its leadership is refused with (high availability).
var ErrDeposedLeader = errors.New("taskmanager: deposed leader")

// slotReportKey makes slot reports latest-value-wins in the outbox.
const slotReportKey = "slot-report"

// rmConnection is the TaskExecutor's side of its ResourceManager
// registration. The client lives as long as the TaskExecutor; every
// (re)registration gets a fresh outbox, so nothing queued for an older
// registration reaches the ResourceManager after the new one.
type rmConnection struct {
	client pb.ResourceManagerServiceClient
	closer io.Closer
	out    *outbox.Outbox
	// gen changes with every (re)registration; continuations of an older
	// one are ignored.
	gen        uint64
	registered bool
	id         string // resource_manager_id of the registered incarnation
	timeout    time.Duration
	lastSeen   time.Time
	watch      clock.Timer
	// deadline bounds the registration round under way (nil when
	// registered): a round lasts across retries until one succeeds.
	deadline clock.Timer
	// lost is set once a registration of this TaskExecutor ended
	// (heartbeat timeout, a lost or refused report, a new leader).
	lost bool
	// reported is set once a slot report of this registration was
	// acknowledged.
	reported bool
	// retry paces registrations after the ResourceManager rejected one,
	// lost this TaskManager, or failed its first slot report; reset once a
	// slot report is acknowledged.
	retry *backoff.Backoff
}

func (te *TaskExecutor) newRMOutbox() *outbox.Outbox {
	return outbox.New("ResourceManager "+te.cfg.ResourceManagerAddress, te.mb, outbox.Config{
		CallTimeout: te.cfg.RPCTimeout, Backoff: te.backoffConfig(), Clock: te.clk, Rand: te.rnd.Float64,
	}, te.log)
}

// connectToResourceManager (re)starts registration, after a backoff pause
// if paced: attempts until one succeeds, the ResourceManager rejects it for
// good, or the TaskExecutor stops. Slots and tasks are kept.
func (te *TaskExecutor) connectToResourceManager(cause string, paced bool) {
	rm := te.rm
	rm.gen = te.nextSeq()
	rm.lost = rm.lost || rm.registered
	rm.registered, rm.id, rm.reported = false, "", false
	if rm.watch != nil {
		rm.watch.Stop()
		rm.watch = nil
	}
	if rm.out != nil {
		rm.out.Close(errors.New(cause))
	}
	rm.out = te.newRMOutbox()
	gen := rm.gen
	te.boundRegistration()
	if !paced {
		te.registerAtResourceManager(gen)
		return
	}
	delay := rm.retry.Next()
	te.log.Info().Str("cause", cause).Dur("retry_in", delay).Int("attempt", rm.retry.Attempts()).
		Msg("registering at the ResourceManager again after a pause")
	te.after(delay, func() {
		if rm.gen == gen && !te.stopping {
			te.registerAtResourceManager(gen)
		}
	})
}

func (te *TaskExecutor) registerAtResourceManager(gen uint64) {
	rm := te.rm
	req := &pb.RegisterTaskExecutorRequest{
		ProtocolVersion: version.ProtocolVersion,
		Location:        te.location(),
		NumberOfSlots:   int32(len(te.slots)),
		InstanceId:      te.instanceID,
		Hardware:        hardware(te.cfg.ManagedMemory),
	}
	client := rm.client
	var resp *pb.RegisterTaskExecutorResponse
	rm.out.Send(outbox.Message{
		What:     "RegisterTaskExecutor",
		Deadline: -1, // until it succeeds or a newer registration replaces it
		Call: func(ctx context.Context) error {
			r, err := client.RegisterTaskExecutor(ctx, req)
			resp = r
			return err
		},
		Done: func(err error) {
			if te.stopping || rm.gen != gen || errors.Is(err, outbox.ErrClosed) {
				return
			}
			if err != nil {
				st := status.Convert(errors.Unwrap(err))
				switch status.Code(err) {
				case codes.FailedPrecondition:
					te.fail(fmt.Errorf("taskmanager: the ResourceManager at %s rejected the registration of %s (protocol version %d): %s",
						te.cfg.ResourceManagerAddress, te.cfg.ResourceID, version.ProtocolVersion, st.Message()))
					return
				case codes.AlreadyExists:
					te.fail(fmt.Errorf("taskmanager: the ResourceManager at %s rejected the registration: resource ID %q is held by another live TaskManager: %s",
						te.cfg.ResourceManagerAddress, te.cfg.ResourceID, st.Message()))
					return
				}
				err = tlsconf.Explain(err, te.cfg.InternalTLS != nil)
				te.log.Warn().Err(err).Str("resource_manager", te.cfg.ResourceManagerAddress).Msg("registration at the ResourceManager failed")
				te.connectToResourceManager(fmt.Sprintf("registration failed: %v", err), true)
				return
			}
			timeout := time.Duration(resp.HeartbeatTimeoutMs) * time.Millisecond
			if timeout <= 0 {
				timeout = te.cfg.HeartbeatTimeout
			}
			rm.registered, rm.id, rm.timeout, rm.lastSeen = true, resp.ResourceManagerId, timeout, te.clk.Now()
			if rm.deadline != nil {
				rm.deadline.Stop()
				rm.deadline = nil
			}
			te.log.Info().Str("resource_manager_id", rm.id).Dur("heartbeat_timeout", timeout).Msg("registered at the ResourceManager")
			if len(resp.DelegationTokens) > 0 && te.tokens != nil {
				_ = te.applyDelegationTokens(resp.DelegationTokens) // logged; the old tokens, if any, stay
			}
			if te.prestart != nil {
				// After the tokens: the runner's environment carries them.
				te.prestart()
				te.prestart = nil
			}
			te.sendSlotReport()
			te.watchResourceManager(gen)
		},
	})
}

// boundRegistration starts the deadline of a registration round unless
// one runs: RegistrationTimeout (Flink's), or without high availability,
// once a registration was lost, the lost one's heartbeat timeout, as for
// a ResourceManager that went silent while registered. A round whose
// response was lost with its ResourceManager would otherwise retry for
// ever.
func (te *TaskExecutor) boundRegistration() {
	rm := te.rm
	if rm.deadline != nil {
		return
	}
	limit, lost := te.cfg.RegistrationTimeout, te.cfg.ExitOnResourceManagerLoss && rm.lost
	if lost {
		limit = min(limit, rm.timeout)
	}
	rm.deadline = te.after(limit, func() {
		rm.deadline = nil
		if te.stopping || rm.registered {
			return
		}
		if lost {
			te.fail(fmt.Errorf("%w: ResourceManager at %s unreachable for the heartbeat timeout %v; without high availability nothing recovers its jobs",
				ErrResourceManagerLost, te.cfg.ResourceManagerAddress, limit))
			return
		}
		te.fail(fmt.Errorf("%w: not registered at the ResourceManager at %s within %v (taskmanager.registration.timeout)",
			ErrRegistrationTimeout, te.cfg.ResourceManagerAddress, limit))
	})
}

// resourceManagerHeartbeat records a heartbeat of the registered
// ResourceManager.
func (te *TaskExecutor) resourceManagerHeartbeat(senderID string) {
	te.pruneAttempts()
	if rm := te.rm; rm != nil && rm.registered && (senderID == "" || senderID == rm.id) {
		rm.lastSeen = te.clk.Now()
	}
}

// watchResourceManager registers again once the ResourceManager's
// heartbeats stop for the heartbeat timeout.
func (te *TaskExecutor) watchResourceManager(gen uint64) {
	rm := te.rm
	left := rm.timeout - te.clk.Now().Sub(rm.lastSeen)
	rm.watch = te.after(left, func() {
		if te.stopping || rm.gen != gen || !rm.registered {
			return
		}
		if silent := te.clk.Now().Sub(rm.lastSeen); silent >= rm.timeout {
			if te.cfg.ExitOnResourceManagerLoss {
				te.fail(fmt.Errorf("%w: ResourceManager %s at %s silent for the heartbeat timeout %v; without high availability nothing recovers its jobs",
					ErrResourceManagerLost, rm.id, te.cfg.ResourceManagerAddress, rm.timeout))
				return
			}
			te.log.Warn().Str("resource_manager_id", rm.id).Dur("heartbeat_timeout", rm.timeout).
				Msg("ResourceManager heartbeat timed out; registering again")
			te.connectToResourceManager(fmt.Sprintf("heartbeat of ResourceManager %s timed out after %v", rm.id, rm.timeout), false)
			return
		}
		te.watchResourceManager(gen)
	})
}

// sendSlotReport sends the current slot report to the registered
// ResourceManager. A queued report is replaced by a newer one, so the
// ResourceManager gets the latest without working through stale ones. If
// the first report after a registration fails, or the ResourceManager no
// longer knows this TaskManager, it registers again after a pause; other
// failures wait for the next heartbeat, which carries the report too.
func (te *TaskExecutor) sendSlotReport() {
	rm := te.rm
	if rm == nil || !rm.registered || te.stopping && te.draining {
		return
	}
	gen := rm.gen
	req := &pb.SendSlotReportRequest{ResourceId: te.cfg.ResourceID, InstanceId: te.instanceID, SlotReport: te.slotReport()}
	client := rm.client
	rm.out.Send(outbox.Message{
		What:     "SendSlotReport",
		Key:      slotReportKey,
		Deadline: rm.timeout,
		Call: func(ctx context.Context) error {
			_, err := client.SendSlotReport(ctx, req)
			return err
		},
		Done: func(err error) {
			if rm.gen != gen || errors.Is(err, outbox.ErrClosed) {
				return // a newer registration sends its own report
			}
			switch {
			case err == nil:
				rm.reported = true
				rm.retry.Reset()
			case errors.Is(err, outbox.ErrSuperseded):
			default:
				initial := !rm.reported
				te.log.Warn().Err(err).Bool("initial", initial).Msg("slot report to the ResourceManager failed")
				if !te.stopping && (initial || status.Code(err) == codes.NotFound) {
					te.connectToResourceManager(fmt.Sprintf("slot report failed: %v", err), true)
				}
			}
		},
	})
}

// disconnectFromResourceManager tells the ResourceManager this TaskManager
// is leaving; done runs when that is over.
func (te *TaskExecutor) disconnectFromResourceManager(done func()) {
	rm := te.rm
	req := &pb.DisconnectTaskExecutorRequest{ResourceId: te.cfg.ResourceID, Cause: fmt.Sprintf("TaskManager %s is shutting down", te.cfg.ResourceID)}
	client := rm.client
	rm.out.Send(outbox.Message{
		What:     "DisconnectTaskExecutor",
		Deadline: te.cfg.RPCTimeout,
		Call: func(ctx context.Context) error {
			_, err := client.DisconnectTaskExecutor(ctx, req)
			return err
		},
		Done: func(err error) {
			if err != nil {
				te.log.Debug().Err(err).Msg("disconnecting from the ResourceManager failed")
			}
			done()
		},
	})
}
