package stream

import (
	"sync"

	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/stream/runtime"
)

// taskUserMetrics is a cluster task's metric group (TaskEnv.Metrics): each
// operator's AddGroup is a LocalMetrics of its own, so the runner reports
// user metrics by operator as Flink's operator scope; metrics registered
// on the task's group itself have no operator. Safe for concurrent use.
type taskUserMetrics struct {
	*runtime.LocalMetrics // the task's own group
	mu                    sync.Mutex
	ops                   []operatorMetrics // in registration order
}

type operatorMetrics struct {
	name string
	m    *runtime.LocalMetrics
}

func newTaskUserMetrics() *taskUserMetrics {
	return &taskUserMetrics{LocalMetrics: runtime.NewLocalMetrics()}
}

// AddGroup implements runtime.MetricGroup: the runtime calls it once per
// operator with the operator's name; operators of a chain with the same
// name share a group.
func (g *taskUserMetrics) AddGroup(name string) runtime.MetricGroup {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, o := range g.ops {
		if o.name == name {
			return o.m
		}
	}
	m := runtime.NewLocalMetrics()
	g.ops = append(g.ops, operatorMetrics{name: name, m: m})
	return m
}

// dump reads every user metric of the task; nil when there are none.
func (g *taskUserMetrics) dump() []*pb.UserMetric {
	g.mu.Lock()
	ops := append([]operatorMetrics{{m: g.LocalMetrics}}, g.ops...)
	g.mu.Unlock()
	var out []*pb.UserMetric
	for _, o := range ops {
		for _, d := range o.m.Dump() {
			um := &pb.UserMetric{OperatorName: o.name, Name: d.Name, Value: d.Value}
			switch d.Type {
			case runtime.CounterMetric:
				um.Type = pb.UserMetric_TYPE_COUNTER
			case runtime.GaugeMetric:
				um.Type = pb.UserMetric_TYPE_GAUGE
			case runtime.HistogramMetric:
				h := d.Histogram
				um.Type = pb.UserMetric_TYPE_HISTOGRAM
				um.Histogram = &pb.HistogramStatistics{Count: h.Count, Min: h.Min, Max: h.Max, Mean: h.Mean, P50: h.P50, P95: h.P95, P99: h.P99}
			}
			out = append(out, um)
		}
	}
	return out
}
