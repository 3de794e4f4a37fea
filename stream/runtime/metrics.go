package runtime

import (
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// MetricGroup registers an operator's user metrics (Flink's MetricGroup).
// Registering a name again returns the metric already registered under it
// (a Gauge replaces its function). Methods are safe for concurrent use:
// the operator registers and updates on the task's goroutine, a reporter
// reads from its own.
type MetricGroup interface {
	// Counter returns the counter name of this group.
	Counter(name string) Counter
	// Gauge registers fn, called by the reporter (any goroutine) to read
	// the gauge name; fn must be safe for that.
	Gauge(name string, fn func() float64)
	// Histogram returns the histogram name of this group.
	Histogram(name string) Histogram
	// AddGroup returns the subgroup name (Flink's addGroup).
	AddGroup(name string) MetricGroup
}

// Counter counts (Flink's Counter).
type Counter interface {
	Inc()
	Add(n int64)
	Count() int64
}

// Histogram records a distribution of values (Flink's Histogram).
type Histogram interface {
	Update(v int64)
	Statistics() HistogramStatistics
}

// HistogramStatistics is a histogram's summary.
type HistogramStatistics struct {
	Count         int64
	Min, Max      int64
	Mean          float64
	P50, P95, P99 float64
}

// LocalMetrics is an in-memory MetricGroup tree: the runtime gives each
// operator a group of it when the task's environment brings none (the
// local executor, tests). A TaskManager's metrics package may back
// MetricGroup differently and read this one with Snapshot.
type LocalMetrics struct {
	prefix string
	reg    *localRegistry
}

type localRegistry struct {
	mu         sync.Mutex
	counters   map[string]*localCounter
	gauges     map[string]func() float64
	histograms map[string]*localHistogram
}

// NewLocalMetrics returns an empty in-memory metric tree.
func NewLocalMetrics() *LocalMetrics {
	return &LocalMetrics{reg: &localRegistry{counters: map[string]*localCounter{}, gauges: map[string]func() float64{}, histograms: map[string]*localHistogram{}}}
}

func (m *LocalMetrics) name(n string) string {
	if m.prefix == "" {
		return n
	}
	return m.prefix + "." + n
}

// Counter implements MetricGroup.
func (m *LocalMetrics) Counter(name string) Counter {
	m.reg.mu.Lock()
	defer m.reg.mu.Unlock()
	n := m.name(name)
	c, ok := m.reg.counters[n]
	if !ok {
		c = &localCounter{}
		m.reg.counters[n] = c
	}
	return c
}

// Gauge implements MetricGroup.
func (m *LocalMetrics) Gauge(name string, fn func() float64) {
	m.reg.mu.Lock()
	defer m.reg.mu.Unlock()
	m.reg.gauges[m.name(name)] = fn
}

// Histogram implements MetricGroup.
func (m *LocalMetrics) Histogram(name string) Histogram {
	m.reg.mu.Lock()
	defer m.reg.mu.Unlock()
	n := m.name(name)
	h, ok := m.reg.histograms[n]
	if !ok {
		h = &localHistogram{}
		m.reg.histograms[n] = h
	}
	return h
}

// AddGroup implements MetricGroup.
func (m *LocalMetrics) AddGroup(name string) MetricGroup {
	return &LocalMetrics{prefix: m.name(name), reg: m.reg}
}

// Snapshot reads every metric under this group by its dotted name below
// the group: counters and gauges as values, histograms as
// "<name>.count", ".min", ".max", ".mean", ".p50", ".p95", ".p99".
func (m *LocalMetrics) Snapshot() map[string]float64 {
	out := map[string]float64{}
	for _, d := range m.Dump() {
		if d.Type != HistogramMetric {
			out[d.Name] = d.Value
			continue
		}
		s, r := d.Histogram, d.Name
		out[r+".count"], out[r+".min"], out[r+".max"] = float64(s.Count), float64(s.Min), float64(s.Max)
		out[r+".mean"], out[r+".p50"], out[r+".p95"], out[r+".p99"] = s.Mean, s.P50, s.P95, s.P99
	}
	return out
}

type localCounter struct{ n atomic.Int64 }

func (c *localCounter) Inc()         { c.n.Add(1) }
func (c *localCounter) Add(n int64)  { c.n.Add(n) }
func (c *localCounter) Count() int64 { return c.n.Load() }

// histogramWindow is how many recent values a local histogram keeps, as
// Flink's DescriptiveStatisticsHistogram with its default window.
const histogramWindow = 1024

type localHistogram struct {
	mu     sync.Mutex
	count  int64
	values []int64 // ring of the last histogramWindow values
}

func (h *localHistogram) Update(v int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.values) < histogramWindow {
		h.values = append(h.values, v)
	} else {
		h.values[h.count%histogramWindow] = v
	}
	h.count++
}

func (h *localHistogram) Statistics() HistogramStatistics {
	h.mu.Lock()
	vs := append([]int64(nil), h.values...)
	s := HistogramStatistics{Count: h.count}
	h.mu.Unlock()
	if len(vs) == 0 {
		return s
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	var sum float64
	for _, v := range vs {
		sum += float64(v)
	}
	q := func(p float64) float64 { return float64(vs[int(math.Ceil(p*float64(len(vs))))-1]) }
	s.Min, s.Max, s.Mean = vs[0], vs[len(vs)-1], sum/float64(len(vs))
	s.P50, s.P95, s.P99 = q(0.5), q(0.95), q(0.99)
	return s
}

// WatermarkGauges are a task's current input watermark (the combined
// watermark of its inputs) and output watermark (the last it wrote), Flink's
// currentInputWatermark and currentOutputWatermark: the task stores, a
// reporter on any goroutine loads. MinWatermark before the first.
type WatermarkGauges struct{ input, output atomic.Int64 }

// NewWatermarkGauges returns gauges at MinWatermark.
func NewWatermarkGauges() *WatermarkGauges {
	g := &WatermarkGauges{}
	g.input.Store(MinWatermark)
	g.output.Store(MinWatermark)
	return g
}

// Input is the task's current input watermark.
func (g *WatermarkGauges) Input() int64 { return g.input.Load() }

// Output is the last watermark the task wrote to its outputs.
func (g *WatermarkGauges) Output() int64 { return g.output.Load() }

// MetricType is the kind of a MetricDump.
type MetricType int

// Metric kinds.
const (
	CounterMetric MetricType = iota + 1
	GaugeMetric
	HistogramMetric
)

// MetricDump is one metric's value at a Dump.
type MetricDump struct {
	// Name is the dotted name below the dumped group.
	Name  string
	Type  MetricType
	Value float64 // a counter's count, a gauge's value
	// Histogram is a histogram's statistics.
	Histogram HistogramStatistics
}

// Dump reads every metric under this group, sorted by name, for a
// reporter; gauges' functions run on the caller's goroutine.
func (m *LocalMetrics) Dump() []MetricDump {
	m.reg.mu.Lock()
	var out []MetricDump
	rel := func(n string) (string, bool) {
		if m.prefix == "" {
			return n, true
		}
		return strings.CutPrefix(n, m.prefix+".")
	}
	for n, c := range m.reg.counters {
		if r, ok := rel(n); ok {
			out = append(out, MetricDump{Name: r, Type: CounterMetric, Value: float64(c.Count())})
		}
	}
	gauges := map[string]func() float64{}
	for n, g := range m.reg.gauges {
		if r, ok := rel(n); ok {
			gauges[r] = g
		}
	}
	hists := map[string]*localHistogram{}
	for n, h := range m.reg.histograms {
		if r, ok := rel(n); ok {
			hists[r] = h
		}
	}
	m.reg.mu.Unlock()
	// Outside the lock: a gauge may register metrics.
	for n, g := range gauges {
		out = append(out, MetricDump{Name: n, Type: GaugeMetric, Value: g()})
	}
	for n, h := range hists {
		out = append(out, MetricDump{Name: n, Type: HistogramMetric, Histogram: h.Statistics()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
