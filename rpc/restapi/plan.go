package restapi

import (
	"strings"

	"github.com/gofl/gofl/jobgraph"
)

// NewJobPlan is jg in Flink's JobPlanInfo shape, the edges as each target's
// inputs in input order. An edge without a ship strategy is named by its
// distribution: FORWARD (pointwise) or REBALANCE (all to all), as Flink
// names the default partitioners.
func NewJobPlan(jobID string, jg *jobgraph.JobGraph) JobPlan {
	p := JobPlan{ID: jobID, Name: jg.Name, Type: jg.Type.String(), Nodes: make([]JobPlanNode, 0, len(jg.Vertices))}
	at := make(map[jobgraph.VertexID]int, len(jg.Vertices))
	for _, v := range jg.Vertices {
		at[v.ID] = len(p.Nodes)
		p.Nodes = append(p.Nodes, JobPlanNode{ID: string(v.ID), Parallelism: v.Parallelism, Operator: "",
			OperatorStrategy: "", Description: v.Name, OptimizerProperties: map[string]string{}})
	}
	for _, e := range jg.Edges {
		if e == nil {
			continue
		}
		i, ok := at[e.Target]
		if !ok {
			continue
		}
		ship := strings.ToUpper(e.ShipStrategy)
		if ship == "" {
			ship = "REBALANCE"
			if e.Distribution == jobgraph.Pointwise {
				ship = "FORWARD"
			}
		}
		exchange := "pipelined_bounded"
		if e.PartitionType == jobgraph.Blocking {
			exchange = "blocking"
		}
		n := &p.Nodes[i]
		n.Inputs = append(n.Inputs, JobPlanInput{Num: len(n.Inputs), ID: string(e.Source), ShipStrategy: ship, Exchange: exchange})
	}
	return p
}
