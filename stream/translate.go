package stream

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/stream/runtime"
)

// Invokable is the JobGraph invokable of every stream vertex.
const Invokable = "stream"

// ConfigParallelism is the JobGraph config key holding the environment's
// default parallelism (Flink's parallelism.default).
const ConfigParallelism = "parallelism.default"

// DefaultSlotSharingGroup is the group of operators that name none and whose
// inputs disagree (or that have no inputs), as in Flink.
const DefaultSlotSharingGroup = "default"

// Plan is a translated job: the JobGraph and, per vertex, the chain the
// runtime executes (with the user's closures, which exist only in the
// process that ran the builder).
type Plan struct {
	Graph *jobgraph.JobGraph
	// Tasks maps each vertex to its chain.
	Tasks map[jobgraph.VertexID]*runtime.TaskSpec
	// Inputs lists, per vertex, its input edges (indexes into Graph.Edges)
	// and the logical input each feeds.
	Inputs map[jobgraph.VertexID][]TaskInput
	// Outputs lists, per vertex, the edges (indexes into Graph.Edges) its
	// TaskSpec.Outputs write, in that order.
	Outputs map[jobgraph.VertexID][]int

	operators map[string]*runtime.OperatorSpec
	opIDs     []string // operator ID by stream node
	env       *Environment
}

// TaskInput is one input edge of a vertex.
type TaskInput struct {
	Edge  int // index into JobGraph.Edges
	Input int // logical input of the head operator (0 or 1)
}

// Operator returns the operator with the given ID, as built by this
// process.
func (p *Plan) Operator(id string) (*runtime.OperatorSpec, bool) {
	o, ok := p.operators[id]
	return o, ok
}

// vertexConfig is Vertex.Config: the chain's shape without closures.
type vertexConfig struct {
	NumInputs int            `json:"numInputs"`
	Chain     []chainedOp    `json:"chain"`
	Inputs    []TaskInput    `json:"inputs"`
	Outputs   []vertexOutput `json:"outputs"`
}

type chainedOp struct {
	ID       string `json:"id"`
	Input    int    `json:"input"`
	InputTag string `json:"inputTag,omitempty"`
}

type vertexOutput struct {
	Edge           int    `json:"edge"`
	From           int    `json:"from"`
	Tag            string `json:"tag,omitempty"`
	Partitioner    string `json:"partitioner"`
	MaxParallelism int    `json:"maxParallelism"`
}

type resolved struct {
	par, maxPar int
	ssg         string
	opID        string
	head        *node // chain head
	chainIndex  int
}

// Plan translates the stream graph into a JobGraph with Flink's operator
// chaining. It fails on builder errors (bad settings, an unbounded source
// in Batch mode, a Forward edge between different parallelisms).
func (e *Environment) Plan() (*Plan, error) {
	if e.err != nil {
		return nil, e.err
	}
	if len(e.nodes) == 0 {
		return nil, fmt.Errorf("the job has no operators")
	}
	res := make([]*resolved, len(e.nodes))
	for _, n := range e.nodes {
		r := &resolved{par: n.parallelism}
		if r.par == 0 {
			r.par = e.parallelism
		}
		r.maxPar = n.maxParallelism
		if r.maxPar == 0 {
			r.maxPar = e.maxParallelism
		}
		if r.maxPar == 0 {
			r.maxPar = jobgraph.DefaultMaxParallelism(r.par)
		}
		if r.par > r.maxPar {
			return nil, fmt.Errorf("operator %q: parallelism %d is above its max parallelism %d", n.name, r.par, r.maxPar)
		}
		r.ssg = n.slotSharing
		if r.ssg == "" {
			r.ssg = DefaultSlotSharingGroup
			for i, in := range n.inputs {
				g := res[in.from.id].ssg
				if i == 0 {
					r.ssg = g
				} else if g != r.ssg {
					r.ssg = DefaultSlotSharingGroup
				}
			}
		}
		if n.source && !n.bounded && e.mode == Batch {
			return nil, fmt.Errorf("source %q is unbounded, but Batch mode needs bounded sources", n.name)
		}
		if !n.source && len(n.inputs) == 0 {
			return nil, fmt.Errorf("operator %q has no input", n.name)
		}
		// Deterministic operator ID: the uid, or the position in the graph
		// with kind, name and inputs (Flink's StreamGraphHasherV2 idea).
		h := sha256.New()
		if n.uid != "" {
			fmt.Fprintf(h, "uid:%s", n.uid)
		} else {
			fmt.Fprintf(h, "node:%d|%s|%s", n.id, n.kind, n.name)
			for _, in := range n.inputs {
				fmt.Fprintf(h, "|in:%s/%d/%s", res[in.from.id].opID, in.input, in.part.kind)
				if in.side != nil {
					fmt.Fprintf(h, "/side:%s", in.side.tag)
				}
			}
		}
		r.opID = hex.EncodeToString(h.Sum(nil))[:32]
		res[n.id] = r
	}
	seen := map[string]string{}
	for _, n := range e.nodes {
		if other, dup := seen[res[n.id].opID]; dup {
			return nil, fmt.Errorf("operators %q and %q have the same uid %q", other, n.name, n.uid)
		}
		seen[res[n.id].opID] = n.name
	}

	// Resolve partitioners and chain.
	parts := make([][]string, len(e.nodes))
	for _, n := range e.nodes {
		r := res[n.id]
		parts[n.id] = make([]string, len(n.inputs))
		for i, in := range n.inputs {
			up := res[in.from.id]
			k := in.part.kind
			if k == "" {
				k = "forward"
				if up.par != r.par {
					k = "rebalance"
				}
			}
			if k == "forward" && up.par != r.par {
				return nil, fmt.Errorf("forward from %q (parallelism %d) to %q (parallelism %d): parallelism differs", in.from.name, up.par, n.name, r.par)
			}
			parts[n.id][i] = k
		}
		r.head = n
		if len(n.inputs) == 1 && e.chaining {
			in := n.inputs[0]
			up := res[in.from.id]
			if parts[n.id][0] == "forward" && up.par == r.par && up.maxPar == r.maxPar && up.ssg == r.ssg &&
				in.from.chaining != chainNever && n.chaining == chainAlways {
				r.head = up.head
			}
		}
	}

	p := &Plan{
		Tasks:     map[jobgraph.VertexID]*runtime.TaskSpec{},
		Inputs:    map[jobgraph.VertexID][]TaskInput{},
		Outputs:   map[jobgraph.VertexID][]int{},
		operators: map[string]*runtime.OperatorSpec{},
		env:       e,
	}
	for _, r := range res {
		p.opIDs = append(p.opIDs, r.opID)
	}
	g := &jobgraph.JobGraph{Name: e.name, Type: jobgraph.Streaming, Config: map[string]string{
		"execution.runtime-mode": e.mode.String(),
		// The default parallelism travels with the job, so a runner that
		// re-runs the builder starts from the same default (see Main).
		ConfigParallelism: strconv.Itoa(e.parallelism),
	}}
	if e.mode == Batch {
		g.Type = jobgraph.Batch
	}
	vertexOf := map[*node]*jobgraph.Vertex{}
	chains := map[*node][]*node{}
	var heads []*node
	for _, n := range e.nodes {
		h := res[n.id].head
		if h == n {
			heads = append(heads, n)
		}
		res[n.id].chainIndex = len(chains[h])
		chains[h] = append(chains[h], n)
	}
	for _, h := range heads {
		r := res[h.id]
		vh := sha256.New()
		var names []string
		spec := &runtime.TaskSpec{NumInputs: 0}
		v := &jobgraph.Vertex{Parallelism: r.par, MaxParallelism: r.maxPar, SlotSharingGroup: r.ssg, Invokable: Invokable}
		for _, n := range chains[h] {
			nr := res[n.id]
			fmt.Fprintf(vh, "%s;", nr.opID)
			names = append(names, n.name)
			cfg, err := json.Marshal(n.params)
			if err != nil {
				return nil, fmt.Errorf("operator %q: config: %w", n.name, err)
			}
			v.Operators = append(v.Operators, jobgraph.Operator{ID: nr.opID, Name: n.name, Kind: n.kind, Config: cfg,
				Coordinator: n.coordinator, CoordinatorConfig: n.coordinatorConfig})
			os := runtime.OperatorSpec{ID: nr.opID, Name: n.name, Kind: n.kind, NewOperator: n.newOperator, NewSource: n.newSource, Input: -1}
			if n != h {
				os.Input = res[n.inputs[0].from.id].chainIndex
				os.InputTag = n.inputs[0].tag()
			}
			spec.Operators = append(spec.Operators, os)
		}
		v.ID = jobgraph.VertexID(hex.EncodeToString(vh.Sum(nil))[:32])
		v.Name = strings.Join(names, " -> ")
		spec.Name = v.Name
		for _, in := range h.inputs {
			if in.input+1 > spec.NumInputs {
				spec.NumInputs = in.input + 1
			}
		}
		g.Vertices = append(g.Vertices, v)
		vertexOf[h] = v
		p.Tasks[v.ID] = spec
		for i := range spec.Operators {
			p.operators[spec.Operators[i].ID] = &spec.Operators[i]
		}
	}

	// Edges: for each head in creation order, its inputs in order.
	outs := map[*node][]vertexOutput{}
	for _, h := range heads {
		v := vertexOf[h]
		for i, in := range h.inputs {
			up := res[in.from.id]
			src := vertexOf[up.head]
			k := parts[h.id][i]
			edge := &jobgraph.Edge{Source: src.ID, Target: v.ID, Distribution: jobgraph.AllToAll, PartitionType: jobgraph.Pipelined, ShipStrategy: strings.ToUpper(k)}
			if k == "forward" {
				edge.Distribution = jobgraph.Pointwise
			}
			if e.mode == Batch {
				edge.PartitionType = jobgraph.Blocking
			}
			idx := len(g.Edges)
			g.Edges = append(g.Edges, edge)
			p.Inputs[v.ID] = append(p.Inputs[v.ID], TaskInput{Edge: idx, Input: in.input})
			p.Outputs[src.ID] = append(p.Outputs[src.ID], idx)
			outs[up.head] = append(outs[up.head], vertexOutput{Edge: idx, From: up.chainIndex, Tag: in.tag(), Partitioner: k, MaxParallelism: res[h.id].maxPar})
			c, err := exchangeCodec(in, h)
			if err != nil {
				return nil, err
			}
			spec := p.Tasks[src.ID]
			out := runtime.OutputSpec{From: up.chainIndex, Tag: in.tag(), NewPartitioner: newPartitioner(k, in.part, res[h.id].maxPar), Codec: c}
			if h.combiner != nil && k == "hash" {
				out.NewCombiner, out.CombinerName = h.combiner, "Combine ("+h.name+")"
			}
			spec.Outputs = append(spec.Outputs, out)
			tspec := p.Tasks[v.ID]
			for len(tspec.InputCodecs) <= in.input {
				tspec.InputCodecs = append(tspec.InputCodecs, nil)
			}
			tspec.InputCodecs[in.input] = c
		}
	}
	for _, h := range heads {
		v := vertexOf[h]
		spec := p.Tasks[v.ID]
		vc := vertexConfig{NumInputs: spec.NumInputs, Inputs: p.Inputs[v.ID], Outputs: outs[h]}
		for _, o := range spec.Operators {
			vc.Chain = append(vc.Chain, chainedOp{ID: o.ID, Input: o.Input, InputTag: o.InputTag})
		}
		cfg, err := json.Marshal(vc)
		if err != nil {
			return nil, err
		}
		v.Config = cfg
	}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	g.Fingerprint = Fingerprint(g)
	p.Graph = g
	return p, nil
}

func newPartitioner(kind string, part partitioning, maxPar int) func(int) runtime.Partitioner {
	switch kind {
	case "hash":
		return func(int) runtime.Partitioner {
			return runtime.KeyGroupPartitioner{KeyOf: part.keyOf, HashOf: part.hashOf, MaxParallelism: maxPar}
		}
	case "rebalance":
		return func(s int) runtime.Partitioner { return runtime.NewRebalance(s) }
	case "broadcast":
		return func(int) runtime.Partitioner { return runtime.Broadcast{} }
	}
	return func(int) runtime.Partitioner { return runtime.Forward{} }
}

// Fingerprint hashes the canonical form of a JobGraph: its type, name,
// config, vertices sorted by ID (with their operators and configs) and
// edges in order, but not JobID or Fingerprint. Two runs of a deterministic
// builder yield the same fingerprint.
func Fingerprint(g *jobgraph.JobGraph) string {
	type canon struct {
		Name     string
		Type     string
		Config   map[string]string
		Vertices []jobgraph.Vertex
		Edges    []jobgraph.Edge
	}
	c := canon{Name: g.Name, Type: g.Type.String(), Config: g.Config}
	for _, v := range g.Vertices {
		c.Vertices = append(c.Vertices, *v)
	}
	sort.Slice(c.Vertices, func(i, j int) bool { return c.Vertices[i].ID < c.Vertices[j].ID })
	for _, e := range g.Edges {
		c.Edges = append(c.Edges, *e)
	}
	b, err := json.Marshal(c)
	if err != nil {
		panic(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// JobGraph translates the environment's stream graph (see Plan).
func (e *Environment) JobGraph() (*jobgraph.JobGraph, error) {
	p, err := e.Plan()
	if err != nil {
		return nil, err
	}
	return p.Graph, nil
}
