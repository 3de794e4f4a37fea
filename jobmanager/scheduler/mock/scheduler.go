package mock

import (
	"fmt"
	"time"

	"github.com/gofl/gofl/jobgraph"
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/jobmanager/failover"
	"github.com/gofl/gofl/jobmanager/scheduler"
	"github.com/gofl/gofl/rpc/pb"
)

// Config is scheduler.DefaultConfig with restart-strategy.type "none" set
// explicitly, so any task failure fails the job, and strict transitions, so
// a bug of the core panics.
func Config() scheduler.Config {
	cfg := scheduler.DefaultConfig()
	cfg.Restart.Type = failover.RestartTypeNone
	cfg.StrictTransitions = true
	return cfg
}

// RestartingConfig is Config with a fixed-delay restart strategy allowing
// attempts restarts, each after delay.
func RestartingConfig(attempts int, delay time.Duration) scheduler.Config {
	cfg := Config()
	cfg.Restart.Type = failover.RestartTypeFixedDelay
	cfg.Restart.FixedDelayAttempts = attempts
	cfg.Restart.FixedDelay = delay
	return cfg
}

// TaskManager is the location of TaskManager i: ID "tm-<i>", host
// 127.0.0.1, data port 40000+i.
func TaskManager(i int) eg.TaskManagerLocation {
	return eg.TaskManagerLocation{ID: fmt.Sprintf("tm-%d", i), Host: "127.0.0.1", DataAddress: fmt.Sprintf("127.0.0.1:%d", 40000+i)}
}

// TaskManagers returns the slot offers of n TaskManagers with slotsEach
// slots each: TaskManager "tm-<i>" offers allocations "tm-<i>/<j>".
func TaskManagers(n, slotsEach int) []scheduler.SlotsOffered {
	out := make([]scheduler.SlotsOffered, n)
	for i := range out {
		loc := TaskManager(i)
		slots := make([]scheduler.SlotOffer, slotsEach)
		for j := range slots {
			slots[j] = scheduler.SlotOffer{Allocation: eg.AllocationID(fmt.Sprintf("%s/%d", loc.ID, j)), SlotIndex: j}
		}
		out[i] = scheduler.SlotsOffered{TaskManager: loc, Slots: slots}
	}
	return out
}

// TaskManagersFor returns offers of enough TaskManagers with slotsEach slots
// each to hold at least slots slots.
func TaskManagersFor(slots, slotsEach int) []scheduler.SlotsOffered {
	return TaskManagers((slots+slotsEach-1)/slotsEach, slotsEach)
}

// New builds a scheduler for jg with graph ID 1, panicking on error.
func New(cfg scheduler.Config, jg *jobgraph.JobGraph) *scheduler.Scheduler {
	s, err := scheduler.New(cfg, jg, 1)
	if err != nil {
		panic(fmt.Sprintf("mock: scheduler.New: %v", err))
	}
	return s
}

// Drive steps s with ev at logical time now and returns the Ready that
// follows. It panics if the scheduler rejects the event.
func Drive(s *scheduler.Scheduler, now time.Duration, ev scheduler.Event) scheduler.Ready {
	if err := s.Step(now, ev); err != nil {
		panic(fmt.Sprintf("mock: Step(%T): %v", ev, err))
	}
	return s.Ready()
}

// Offer steps s with every offer at logical time now and returns the Ready
// that follows them all.
func Offer(s *scheduler.Scheduler, now time.Duration, offers []scheduler.SlotsOffered) scheduler.Ready {
	for _, o := range offers {
		if err := s.Step(now, o); err != nil {
			panic(fmt.Sprintf("mock: Step(SlotsOffered %s): %v", o.TaskManager.ID, err))
		}
	}
	return s.Ready()
}

// Report steps s with a state report for every attempt at logical time now
// and returns the Ready that follows them all.
func Report(s *scheduler.Scheduler, now time.Duration, state eg.ExecutionState, attempts ...eg.ExecutionAttemptID) scheduler.Ready {
	for _, a := range attempts {
		if err := s.Step(now, scheduler.TaskStateChanged{Attempt: a, State: state}); err != nil {
			panic(fmt.Sprintf("mock: Step(TaskStateChanged %s %s): %v", a, state, err))
		}
	}
	return s.Ready()
}

// Attempts returns the current attempt of every subtask of job vertex id,
// in subtask order.
func Attempts(s *scheduler.Scheduler, id jobgraph.VertexID) []eg.ExecutionAttemptID {
	g := s.Graph()
	jv := g.JobVertex(id)
	if jv == nil {
		panic(fmt.Sprintf("mock: no job vertex %q", id))
	}
	out := make([]eg.ExecutionAttemptID, jv.Parallelism)
	for i := range out {
		out[i] = g.AttemptID(jv.VertexAt(i))
	}
	return out
}

// AttemptOf converts the attempt of a deployed TDD back to its ID.
func AttemptOf(d scheduler.Deployment) eg.ExecutionAttemptID {
	return FromProto(d.Descriptor.GetAttempt())
}

// FromProto converts a wire attempt ID.
func FromProto(a *pb.ExecutionAttemptID) eg.ExecutionAttemptID {
	return eg.ExecutionAttemptID{Graph: a.GetGraph(), JobVertex: jobgraph.VertexID(a.GetJobVertexId()), Subtask: a.GetSubtaskIndex(), Attempt: a.GetAttemptNumber()}
}
