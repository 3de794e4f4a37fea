package scheduler

import (
	"slices"

	"github.com/gofl/gofl/jobgraph"
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
)

// SchedulingStrategy decides which executions to schedule when. It is
// called only from the scheduler's goroutine; no method blocks, and it acts
// only through SchedulerOperations.
type SchedulingStrategy interface {
	// StartScheduling schedules the first executions. Called once.
	StartScheduling()
	// RestartTasks schedules vertices that were just reset to CREATED.
	RestartTasks(vs []eg.VertexIndex)
	// OnExecutionStateChange is called after an execution reached RUNNING
	// or FINISHED.
	OnExecutionStateChange(v eg.VertexIndex, state eg.ExecutionState)
	// OnPartitionConsumable is called when a PIPELINED partition has data.
	OnPartitionConsumable(p eg.PartitionIndex)
}

// SchedulerOperations is what a strategy may ask of the scheduler.
type SchedulerOperations interface {
	// AllocateSlotsAndDeploy schedules vs (all CREATED) as one bulk: their
	// slots are requested together and they are deployed in topological
	// order once all slots are there. A strict bulk fails if it is not
	// fulfilled within slot.request.timeout; a lenient one only if it could
	// not be fulfilled even with every slot of the pool.
	AllocateSlotsAndDeploy(vs []eg.VertexIndex, strict bool)
}

func newStrategy(name string, g *eg.Graph, ops SchedulerOperations) SchedulingStrategy {
	switch name {
	case StrategyEager:
		return &eagerStrategy{g: g, ops: ops}
	case StrategyLazyFromSources:
		return &lazyFromSourcesStrategy{g: g, ops: ops, strict: true}
	case StrategyLazyFromSourcesBatchRequests:
		return &lazyFromSourcesStrategy{g: g, ops: ops}
	}
	return &pipelinedRegionStrategy{g: g, ops: ops, scheduled: make([]bool, len(g.Regions))}
}

// pipelinedRegionStrategy schedules one pipelined region at a time, as soon
// as every BLOCKING input of the region is finished.
type pipelinedRegionStrategy struct {
	g         *eg.Graph
	ops       SchedulerOperations
	scheduled []bool
}

func (s *pipelinedRegionStrategy) StartScheduling() {
	for r := range s.g.Regions {
		s.maybeSchedule(eg.RegionIndex(r))
	}
}

func (s *pipelinedRegionStrategy) RestartTasks(vs []eg.VertexIndex) {
	var regions []eg.RegionIndex
	for _, v := range vs {
		r := s.g.Vertices[v].Region
		if s.scheduled[r] {
			s.scheduled[r] = false
			regions = append(regions, r)
		}
	}
	slices.Sort(regions)
	for _, r := range regions {
		s.maybeSchedule(r)
	}
}

func (s *pipelinedRegionStrategy) OnExecutionStateChange(v eg.VertexIndex, state eg.ExecutionState) {
	if state != eg.Finished {
		return
	}
	forFinishedBlockingGroups(s.g, v, func(grp *eg.ConsumedPartitionGroup) {
		for _, r := range grp.ConsumerRegions {
			s.maybeSchedule(r)
		}
	})
}

func (s *pipelinedRegionStrategy) OnPartitionConsumable(eg.PartitionIndex) {}

func (s *pipelinedRegionStrategy) maybeSchedule(r eg.RegionIndex) {
	if s.scheduled[r] {
		return
	}
	reg := &s.g.Regions[r]
	for _, gi := range reg.ConsumedGroups {
		if s.g.Groups[gi].UnfinishedPartitions > 0 {
			return
		}
	}
	s.scheduled[r] = true
	vs := make([]eg.VertexIndex, 0, len(reg.Vertices))
	for _, v := range reg.Vertices {
		if s.g.Vertices[v].Current.State == eg.Created {
			vs = append(vs, v)
		}
	}
	s.ops.AllocateSlotsAndDeploy(vs, false)
}

// forFinishedBlockingGroups calls f for each BLOCKING group fed by v that
// has just become fully finished.
func forFinishedBlockingGroups(g *eg.Graph, v eg.VertexIndex, f func(*eg.ConsumedPartitionGroup)) {
	var buf [4]eg.PartitionIndex
	for _, p := range g.ProducedPartitions(buf[:0], v) {
		part := &g.Partitions[p]
		grp := &g.Groups[part.Group]
		if g.Results[part.Result].Type == jobgraph.Blocking && grp.UnfinishedPartitions == 0 {
			f(grp)
		}
	}
}

// eagerStrategy deploys every execution at once, for streaming jobs that
// need all tasks running together.
type eagerStrategy struct {
	g   *eg.Graph
	ops SchedulerOperations
}

func (s *eagerStrategy) StartScheduling() {
	vs := make([]eg.VertexIndex, len(s.g.Vertices))
	for i := range vs {
		vs[i] = eg.VertexIndex(i)
	}
	s.ops.AllocateSlotsAndDeploy(vs, true)
}

func (s *eagerStrategy) RestartTasks(vs []eg.VertexIndex)                         { s.ops.AllocateSlotsAndDeploy(vs, true) }
func (s *eagerStrategy) OnExecutionStateChange(eg.VertexIndex, eg.ExecutionState) {}
func (s *eagerStrategy) OnPartitionConsumable(eg.PartitionIndex)                  {}

// lazyFromSourcesStrategy starts the sources and schedules each consumer
// once all its inputs are consumable: BLOCKING inputs finished, PIPELINED
// inputs producing. With strict unset it uses batch slot requests, which
// wait for slots freed by earlier stages instead of timing out, so a job can
// run with fewer slots than tasks.
type lazyFromSourcesStrategy struct {
	g      *eg.Graph
	ops    SchedulerOperations
	strict bool
}

func (s *lazyFromSourcesStrategy) StartScheduling() {
	for v := range s.g.Vertices {
		s.maybeSchedule(eg.VertexIndex(v))
	}
}

func (s *lazyFromSourcesStrategy) RestartTasks(vs []eg.VertexIndex) {
	for _, v := range vs {
		s.maybeSchedule(v)
	}
}

func (s *lazyFromSourcesStrategy) OnExecutionStateChange(v eg.VertexIndex, state eg.ExecutionState) {
	if state != eg.Finished {
		return
	}
	forFinishedBlockingGroups(s.g, v, s.scheduleConsumers)
}

func (s *lazyFromSourcesStrategy) OnPartitionConsumable(p eg.PartitionIndex) {
	part := &s.g.Partitions[p]
	if grp := &s.g.Groups[part.Group]; grp.UnconsumablePartitions == 0 {
		s.scheduleConsumers(grp)
	}
}

func (s *lazyFromSourcesStrategy) scheduleConsumers(grp *eg.ConsumedPartitionGroup) {
	first, end := grp.Consumers()
	for c := first; c < end; c++ {
		s.maybeSchedule(c)
	}
}

func (s *lazyFromSourcesStrategy) maybeSchedule(v eg.VertexIndex) {
	ev := &s.g.Vertices[v]
	if ev.Current.State != eg.Created {
		return
	}
	for _, gi := range ev.Inputs {
		grp := &s.g.Groups[gi]
		if s.g.IsBlocking(gi) && grp.UnfinishedPartitions > 0 || grp.UnconsumablePartitions > 0 {
			return
		}
	}
	s.ops.AllocateSlotsAndDeploy([]eg.VertexIndex{v}, s.strict)
}
