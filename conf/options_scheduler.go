package conf

import "time"

// Values of SchedulingStrategy.
const (
	SchedulingPipelinedRegion                  = "pipelined-region"
	SchedulingEager                            = "eager"
	SchedulingLazyFromSources                  = "lazy-from-sources"
	SchedulingLazyFromSourcesBatchSlotRequests = "lazy-from-sources-with-batch-slot-request"
)

// Values of SlotAllocator.
const (
	SlotAllocatorSlotSharing = "slot-sharing"
	SlotAllocatorSimple      = "simple"
)

// Values of FailoverStrategy.
const (
	FailoverRegion = "region"
	FailoverFull   = "full"
)

var (
	// DefaultParallelism is the parallelism of operators that do not set one.
	DefaultParallelism = IntOption("parallelism.default", 1,
		"Parallelism of operators and jobs that do not set their own.").
		WithCheck(atLeast(1))
	// SchedulingStrategy picks which vertices the scheduler deploys when.
	SchedulingStrategy = EnumOption("jobmanager.scheduler.scheduling-strategy", SchedulingPipelinedRegion,
		[]string{SchedulingPipelinedRegion, SchedulingEager, SchedulingLazyFromSources, SchedulingLazyFromSourcesBatchSlotRequests},
		"When vertices are scheduled: per pipelined region as its inputs become available, all at once, or lazily from the sources.")
	// SlotAllocator picks how execution slots are requested.
	SlotAllocator = EnumOption("jobmanager.scheduler.slot-allocator", SlotAllocatorSlotSharing,
		[]string{SlotAllocatorSlotSharing, SlotAllocatorSimple},
		"How slots are requested for executions: shared by one subtask of each vertex in a slot sharing group, or one slot per execution.")
	// FailoverStrategy picks which tasks restart after a failure.
	FailoverStrategy = EnumOption("jobmanager.execution.failover-strategy", FailoverRegion,
		[]string{FailoverRegion, FailoverFull},
		"Which tasks restart after a task failure: only the affected pipelined regions, or the whole job.")
	// SlotRequestTimeout bounds how long the JobMaster waits for a slot.
	SlotRequestTimeout = DurationOption("slot.request.timeout", 5*time.Minute,
		"Time the JobMaster waits for a requested slot before the request, and the job's scheduling, fails.").
		WithCheck(positive)
	// SlotIdleTimeout is how long an unused slot stays in the JobMaster's slot pool.
	SlotIdleTimeout = DurationOption("slot.idle.timeout", 50*time.Second,
		"Time an unused slot stays in the JobMaster's slot pool before it is returned to its TaskManager.").
		WithCheck(positive)
	// LocalRecovery makes restarted tasks prefer their previous slot.
	LocalRecovery = BoolOption("state.backend.local-recovery", false,
		"Keep a local copy of task state and reschedule restarted tasks to their previous slot so they can recover from it.")
)
