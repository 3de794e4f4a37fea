package jobgraph

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/gofl/gofl/rpc/pb"
)

// Marshal encodes g in its protobuf wire form.
func Marshal(g *JobGraph) ([]byte, error) {
	b, err := proto.Marshal(ToProto(g))
	if err != nil {
		return nil, fmt.Errorf("jobgraph: marshal: %w", err)
	}
	return b, nil
}

// Unmarshal decodes a protobuf-encoded JobGraph. It does not validate.
func Unmarshal(b []byte) (*JobGraph, error) {
	var m pb.JobGraph
	if err := proto.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("jobgraph: unmarshal: %w", err)
	}
	return FromProto(&m), nil
}

// JobInformation is the job part of g's task deployment descriptors: what
// a TaskManager starts the job's runner with. A per-job TaskManager builds
// it from the staged JobGraph too, to start the runner ahead of the first
// task, which compares the two.
func JobInformation(g *JobGraph) *pb.JobInformation {
	return &pb.JobInformation{JobId: g.JobID, JobName: g.Name, JobType: pb.JobType(g.Type),
		Fingerprint: g.Fingerprint, Config: g.Config, JobBinaryKey: g.BinaryKey, ProgramArgs: g.ProgramArgs}
}

// ToProto converts g to its wire message.
func ToProto(g *JobGraph) *pb.JobGraph {
	m := &pb.JobGraph{
		JobId:        g.JobID,
		Name:         g.Name,
		Type:         pb.JobType(g.Type),
		Fingerprint:  g.Fingerprint,
		Config:       g.Config,
		JobBinaryKey: g.BinaryKey,
		ProgramArgs:  g.ProgramArgs,
	}
	for _, v := range g.Vertices {
		m.Vertices = append(m.Vertices, VertexToProto(v))
	}
	for _, e := range g.Edges {
		m.Edges = append(m.Edges, &pb.JobEdge{
			ResultId:      string(e.Result),
			Source:        string(e.Source),
			Target:        string(e.Target),
			Distribution:  pb.DistributionPattern(e.Distribution),
			PartitionType: pb.ResultPartitionType(e.PartitionType),
			ShipStrategy:  e.ShipStrategy,
		})
	}
	return m
}

// VertexToProto converts one vertex; TaskInformation reuses its operators.
func VertexToProto(v *Vertex) *pb.JobVertex {
	return &pb.JobVertex{
		Id:               string(v.ID),
		Name:             v.Name,
		Parallelism:      int32(v.Parallelism),
		MaxParallelism:   int32(v.MaxParallelism),
		SlotSharingGroup: v.SlotSharingGroup,
		CoLocationGroup:  v.CoLocationGroup,
		Invokable:        v.Invokable,
		Operators:        OperatorsToProto(v.Operators),
		Config:           v.Config,
	}
}

// OperatorsToProto converts an operator chain.
func OperatorsToProto(ops []Operator) []*pb.OperatorDescriptor {
	out := make([]*pb.OperatorDescriptor, len(ops))
	for i, o := range ops {
		out[i] = &pb.OperatorDescriptor{Id: o.ID, Name: o.Name, Kind: o.Kind, Config: o.Config, Coordinator: o.Coordinator, CoordinatorConfig: o.CoordinatorConfig}
	}
	return out
}

// FromProto converts a wire message to a JobGraph. Nil entries stay nil so
// Validate can report them.
func FromProto(m *pb.JobGraph) *JobGraph {
	g := &JobGraph{
		JobID:       m.GetJobId(),
		Name:        m.GetName(),
		Type:        JobType(m.GetType()),
		Fingerprint: m.GetFingerprint(),
		Config:      m.GetConfig(),
		BinaryKey:   m.GetJobBinaryKey(),
		ProgramArgs: m.GetProgramArgs(),
	}
	for _, v := range m.GetVertices() {
		if v == nil {
			g.Vertices = append(g.Vertices, nil)
			continue
		}
		ops := make([]Operator, len(v.GetOperators()))
		for i, o := range v.GetOperators() {
			ops[i] = Operator{ID: o.GetId(), Name: o.GetName(), Kind: o.GetKind(), Config: o.GetConfig(), Coordinator: o.GetCoordinator(), CoordinatorConfig: o.GetCoordinatorConfig()}
		}
		g.Vertices = append(g.Vertices, &Vertex{
			ID:               VertexID(v.GetId()),
			Name:             v.GetName(),
			Parallelism:      int(v.GetParallelism()),
			MaxParallelism:   int(v.GetMaxParallelism()),
			SlotSharingGroup: v.GetSlotSharingGroup(),
			CoLocationGroup:  v.GetCoLocationGroup(),
			Invokable:        v.GetInvokable(),
			Operators:        ops,
			Config:           v.GetConfig(),
		})
	}
	for _, e := range m.GetEdges() {
		if e == nil {
			g.Edges = append(g.Edges, nil)
			continue
		}
		g.Edges = append(g.Edges, &Edge{
			Result:        ResultID(e.GetResultId()),
			Source:        VertexID(e.GetSource()),
			Target:        VertexID(e.GetTarget()),
			Distribution:  DistributionPattern(e.GetDistribution()),
			PartitionType: ResultPartitionType(e.GetPartitionType()),
			ShipStrategy:  e.GetShipStrategy(),
		})
	}
	return g
}
