package taskmanager

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/internal/heartbeat"
	"github.com/gofl/gofl/internal/version"
	"github.com/gofl/gofl/rpc/pb"
)

// rmConnection is the TaskExecutor's side of its ResourceManager
// registration. The gRPC connection lives as long as the TaskExecutor; a
// re-registration reuses it.
type rmConnection struct {
	cc     *grpc.ClientConn
	client pb.ResourceManagerServiceClient
	// gen changes with every (re)registration; continuations of an older
	// one are ignored.
	gen        uint64
	registered bool
	id         string // resource_manager_id of the registered incarnation
	backoff    time.Duration
	monitor    *heartbeat.Monitor[string]

	reportInFlight, reportAgain bool
}

// connectToResourceManager (re)starts registration: attempts with
// exponential backoff until one succeeds, the ResourceManager rejects it for
// good, or the TaskExecutor stops. Slots and tasks are kept.
func (te *TaskExecutor) connectToResourceManager() {
	rm := te.rm
	rm.gen = te.nextSeq()
	rm.registered, rm.id, rm.monitor = false, "", nil
	rm.reportInFlight, rm.reportAgain = false, false
	rm.backoff = te.cfg.RegistrationBackoff
	te.tryRegister(rm.gen, 1)
}

func (te *TaskExecutor) tryRegister(gen uint64, attempt int) {
	rm := te.rm
	if te.stopping || rm.gen != gen {
		return
	}
	req := &pb.RegisterTaskExecutorRequest{
		ProtocolVersion: version.ProtocolVersion,
		Location:        te.location(),
		NumberOfSlots:   int32(len(te.slots)),
		InstanceId:      te.instanceID,
	}
	client := rm.client
	callRPC(te, func(ctx context.Context) (*pb.RegisterTaskExecutorResponse, error) {
		return client.RegisterTaskExecutor(ctx, req)
	}, func(resp *pb.RegisterTaskExecutorResponse, err error) {
		if te.stopping || rm.gen != gen {
			return
		}
		if err != nil {
			st := status.Convert(err)
			switch st.Code() {
			case codes.FailedPrecondition:
				te.fail(fmt.Errorf("taskmanager: the ResourceManager at %s rejected the registration of %s (protocol version %d): %s",
					te.cfg.ResourceManagerAddress, te.cfg.ResourceID, version.ProtocolVersion, st.Message()))
				return
			case codes.AlreadyExists:
				te.fail(fmt.Errorf("taskmanager: the ResourceManager at %s rejected the registration: resource ID %q is held by another live TaskManager: %s",
					te.cfg.ResourceManagerAddress, te.cfg.ResourceID, st.Message()))
				return
			}
			delay := rm.backoff
			rm.backoff = min(2*rm.backoff, MaxRegistrationBackoff)
			ev := te.log.Info()
			if attempt > 1 {
				ev = te.log.Debug()
			}
			ev.Err(err).Int("registration_attempt", attempt).Dur("retry_in", delay).
				Str("resource_manager", te.cfg.ResourceManagerAddress).Msg("registration at the ResourceManager failed; retrying")
			te.after(delay, func() { te.tryRegister(gen, attempt+1) })
			return
		}
		timeout := time.Duration(resp.HeartbeatTimeoutMs) * time.Millisecond
		if timeout <= 0 {
			timeout = te.cfg.HeartbeatTimeout
		}
		rm.registered, rm.id = true, resp.ResourceManagerId
		rm.monitor = heartbeat.New[string](timeout)
		rm.monitor.Seen(rm.id, time.Now())
		te.log.Info().Str("resource_manager_id", rm.id).Int("registration_attempt", attempt).Dur("heartbeat_timeout", timeout).
			Msg("registered at the ResourceManager")
		te.sendSlotReport(true)
		te.watchResourceManager(gen)
	})
}

// watchResourceManager registers again once the ResourceManager's
// heartbeats stop for the heartbeat timeout.
func (te *TaskExecutor) watchResourceManager(gen uint64) {
	rm := te.rm
	te.after(checkPeriod(rm.monitor.Timeout()), func() {
		if te.stopping || rm.gen != gen || !rm.registered {
			return
		}
		if len(rm.monitor.Expired(time.Now())) > 0 {
			te.log.Warn().Str("resource_manager_id", rm.id).Dur("heartbeat_timeout", rm.monitor.Timeout()).
				Msg("ResourceManager heartbeat timed out; registering again")
			te.connectToResourceManager()
			return
		}
		te.watchResourceManager(gen)
	})
}

// sendSlotReport sends the current slot report to the registered
// ResourceManager. Reports are sent one at a time, the latest winning, so
// the ResourceManager never sees them out of order. If the first report
// after a registration fails, or the ResourceManager no longer knows this
// TaskManager, it registers again; other failures wait for the next
// heartbeat, which carries the report too.
func (te *TaskExecutor) sendSlotReport(initial bool) {
	rm := te.rm
	if rm == nil || !rm.registered || te.stopping && te.draining {
		return
	}
	if rm.reportInFlight && !initial {
		rm.reportAgain = true
		return
	}
	rm.reportInFlight, rm.reportAgain = true, false
	gen := rm.gen
	req := &pb.SendSlotReportRequest{ResourceId: te.cfg.ResourceID, InstanceId: te.instanceID, SlotReport: te.slotReport()}
	client := rm.client
	callRPC(te, func(ctx context.Context) (*pb.Ack, error) { return client.SendSlotReport(ctx, req) },
		func(_ *pb.Ack, err error) {
			if rm.gen != gen {
				return // a newer registration sends its own report
			}
			rm.reportInFlight = false
			if err != nil {
				te.log.Warn().Err(err).Bool("initial", initial).Msg("slot report to the ResourceManager failed")
				if !te.stopping && (initial || status.Code(err) == codes.NotFound) {
					te.connectToResourceManager()
				}
				return
			}
			if rm.reportAgain {
				te.sendSlotReport(false)
			}
		})
}
