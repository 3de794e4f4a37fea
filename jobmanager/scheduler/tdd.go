package scheduler

import (
	"crypto/sha256"
	"encoding/hex"

	"google.golang.org/protobuf/proto"

	"github.com/gofl/gofl/jobgraph"
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/rpc/pb"
)

// groupDescriptors caches the shuffle descriptors of one consumed partition
// group, shared by every TDD that reads the group (Flink caches them per
// ConsumedPartitionGroup the same way).
type groupDescriptors struct {
	inline *pb.ShuffleDescriptorList
	key    string
}

// tddFactory builds TaskDeploymentDescriptors. Job and task information
// and each group's shuffle descriptors are built once and shared; a group's
// descriptors above blob.offload.minsize are shipped once as a blob.
type tddFactory struct {
	s        *Scheduler
	jobInfo  *pb.JobInformation
	taskInfo []*pb.TaskInformation
	groups   []*groupDescriptors
	emitted  map[string]bool
}

func newTDDFactory(s *Scheduler) *tddFactory {
	jg := s.g.JobGraph
	return &tddFactory{
		s:        s,
		jobInfo:  jobgraph.JobInformation(jg),
		taskInfo: make([]*pb.TaskInformation, len(s.g.JobVertices)),
		groups:   make([]*groupDescriptors, len(s.g.Groups)),
		emitted:  map[string]bool{},
	}
}

// producerDeployed and producerReset invalidate the cached descriptors of
// the groups v produces into: their producer location or attempt changed.
func (f *tddFactory) producerDeployed(v eg.VertexIndex) { f.invalidate(v) }
func (f *tddFactory) producerReset(v eg.VertexIndex)    { f.invalidate(v) }

func (f *tddFactory) invalidate(v eg.VertexIndex) {
	var buf [4]eg.PartitionIndex
	for _, p := range f.s.g.ProducedPartitions(buf[:0], v) {
		f.groups[f.s.g.Partitions[p].Group] = nil
	}
}

func attemptProto(id eg.ExecutionAttemptID) *pb.ExecutionAttemptID {
	return &pb.ExecutionAttemptID{Graph: id.Graph, JobVertexId: string(id.JobVertex), SubtaskIndex: id.Subtask, AttemptNumber: id.Attempt}
}

func (f *tddFactory) task(jv *eg.ExecutionJobVertex) *pb.TaskInformation {
	if ti := f.taskInfo[jv.Index]; ti != nil {
		return ti
	}
	v := jv.Vertex
	ti := &pb.TaskInformation{JobVertexId: string(v.ID), TaskName: v.Name, NumberOfSubtasks: int32(jv.Parallelism),
		MaxParallelism: int32(jv.MaxParallelism), Invokable: v.Invokable, Operators: jobgraph.OperatorsToProto(v.Operators), Config: v.Config}
	f.taskInfo[jv.Index] = ti
	return ti
}

func (f *tddFactory) descriptors(gi eg.GroupIndex) *groupDescriptors {
	if d := f.groups[gi]; d != nil {
		return d
	}
	g := f.s.g
	grp := &g.Groups[gi]
	list := &pb.ShuffleDescriptorList{Descriptors: make([]*pb.ShuffleDescriptor, 0, grp.NumPartitions)}
	first, end := grp.Partitions()
	for p := first; p < end; p++ {
		producer := g.ProducerOf(p)
		loc := g.Vertices[producer].Current.Location
		list.Descriptors = append(list.Descriptors, &pb.ShuffleDescriptor{
			PartitionIndex: g.Partitions[p].Number, Producer: attemptProto(g.AttemptID(producer)),
			ProducerTaskManagerId: loc.ID, ProducerDataAddress: loc.DataAddress,
		})
	}
	d := &groupDescriptors{inline: list}
	// Offload when the bytes the group would add to all its consumers' TDDs
	// reach the threshold: inline, an ALL_TO_ALL group is copied into every
	// consumer's TDD, which is quadratic in the parallelism.
	if min := f.s.cfg.OffloadMinSize; min > 0 && proto.Size(list)*int(grp.NumConsumers) >= min {
		data, err := proto.MarshalOptions{Deterministic: true}.Marshal(list)
		if err == nil {
			sum := sha256.Sum256(data)
			d = &groupDescriptors{key: "sha256:" + hex.EncodeToString(sum[:])}
			if !f.emitted[d.key] {
				f.emitted[d.key] = true
				f.s.ready.OffloadedBlobs = append(f.s.ready.OffloadedBlobs, Blob{Key: d.key, Data: data})
			}
		}
	}
	f.groups[gi] = d
	return d
}

func (f *tddFactory) build(v eg.VertexIndex) *pb.TaskDeploymentDescriptor {
	g := f.s.g
	ev := &g.Vertices[v]
	jv := g.JobVertices[ev.JobVertex]
	tdd := &pb.TaskDeploymentDescriptor{
		Attempt:         attemptProto(g.AttemptID(v)),
		AllocationId:    string(ev.Current.Allocation),
		JobInformation:  f.jobInfo,
		TaskInformation: f.task(jv),
	}
	for _, r := range jv.Produced {
		p := r.FirstPartition + eg.PartitionIndex(ev.Subtask)
		tdd.ProducedPartitions = append(tdd.ProducedPartitions, &pb.ResultPartitionDeploymentDescriptor{
			ResultId: string(r.ID), PartitionIndex: ev.Subtask, PartitionType: pb.ResultPartitionType(r.Type),
			NumberOfSubpartitions: g.Groups[g.Partitions[p].Group].NumConsumers, ShipStrategy: r.ShipStrategy,
		})
	}
	for _, gi := range ev.Inputs {
		grp := &g.Groups[gi]
		r := g.Results[grp.Result]
		gate := &pb.InputGateDeploymentDescriptor{
			ResultId: string(r.ID), PartitionType: pb.ResultPartitionType(r.Type),
			ConsumedSubpartitionIndex: int32(v - grp.FirstConsumer), NumberOfPartitions: grp.NumPartitions,
		}
		if d := f.descriptors(gi); d.inline != nil {
			gate.ShuffleDescriptors = &pb.InputGateDeploymentDescriptor_Inline{Inline: d.inline}
		} else {
			gate.ShuffleDescriptors = &pb.InputGateDeploymentDescriptor_OffloadedBlobKey{OffloadedBlobKey: d.key}
		}
		tdd.InputGates = append(tdd.InputGates, gate)
	}
	return tdd
}
