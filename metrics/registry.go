package metrics

import (
	"runtime"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Process scopes, as Flink's: the first part of every metric name.
const (
	JobManagerScope  = "jobmanager"
	TaskManagerScope = "taskmanager"
)

// NewRegistry returns a registry with the process's Go runtime metrics
// under flink_<scope>_Status_Go_* (Flink's Status.JVM.* for a Go
// process), the standard process_* and go_* collectors, and labels on
// every metric of the process (host, tm_id...), on its Go status and on
// the process's own collectors cs.
func NewRegistry(scope string, labels prometheus.Labels, cs ...prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	wrapped := prometheus.WrapRegistererWith(labels, reg)
	wrapped.MustRegister(&goStatus{prefix: Name(scope, "Status", "Go")})
	wrapped.MustRegister(cs...)
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(collectors.NewGoCollector())
	return reg
}

// Name joins scope parts and a metric name as Flink's Prometheus reporter
// does: "flink_" and the parts joined with "_", e.g.
// Name("taskmanager", "job", "task", "numRecordsIn").
func Name(parts ...string) string {
	return "flink_" + strings.Join(parts, "_")
}

// Sanitize turns a metric name into a valid Prometheus name part, as
// Flink's PrometheusReporter: every character other than letters, digits,
// ':' and '_' becomes '_'.
func Sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == ':' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			return r
		}
		return '_'
	}, name)
}

// goStatus reports the Go runtime in Flink's Status group shape.
type goStatus struct{ prefix string }

var goStatusHelp = map[string]string{
	"Memory.Heap.Used":      "Bytes of live and not yet swept heap objects.",
	"Memory.Heap.Committed": "Bytes of heap memory obtained from the OS and not released.",
	"Memory.Total":          "Bytes of memory obtained from the OS by the Go runtime.",
	"GC.Count":              "Completed garbage collection cycles.",
	"GC.PauseTime":          "Total stop-the-world pause time of garbage collections, in milliseconds.",
	"Goroutines":            "Goroutines that exist now.",
	"Threads":               "OS threads created by the Go runtime.",
}

// goCounters are the GoStatus values that only grow.
var goCounters = map[string]bool{"GC.Count": true, "GC.PauseTime": true}

// GoStatus is the Go runtime's state by metric name under Flink's
// Status.Go group ("Memory.Heap.Used", "GC.Count", "Goroutines", ...).
func GoStatus() map[string]float64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	threads, _ := runtime.ThreadCreateProfile(nil)
	return map[string]float64{
		"Memory.Heap.Used":      float64(ms.HeapAlloc),
		"Memory.Heap.Committed": float64(ms.HeapSys - ms.HeapReleased),
		"Memory.Total":          float64(ms.Sys),
		"GC.Count":              float64(ms.NumGC),
		"GC.PauseTime":          float64(ms.PauseTotalNs) / 1e6,
		"Goroutines":            float64(runtime.NumGoroutine()),
		"Threads":               float64(threads),
	}
}

// jvmNames maps GoStatus names to the Flink Status.JVM metric a Flink
// dashboard or alert reads for the same concern.
// Go has no heap maximum: Heap.Max is all the memory the runtime obtained.
var jvmNames = map[string]string{
	"Memory.Heap.Used":      "Status.JVM.Memory.Heap.Used",
	"Memory.Heap.Committed": "Status.JVM.Memory.Heap.Committed",
	"Memory.Total":          "Status.JVM.Memory.Heap.Max",
	"GC.Count":              "Status.JVM.GarbageCollector.Go.Count",
	"GC.PauseTime":          "Status.JVM.GarbageCollector.Go.Time",
	"Threads":               "Status.JVM.Threads.Count",
}

// FlinkStatus names a GoStatus for REST: each value as Status.Go.<name>
// and, where Flink has one, under its Status.JVM name. Nil for nil.
func FlinkStatus(goStatus map[string]float64) map[string]float64 {
	if goStatus == nil {
		return nil
	}
	out := make(map[string]float64, 2*len(goStatus))
	for n, v := range goStatus {
		out["Status.Go."+n] = v
		if j, ok := jvmNames[n]; ok {
			out[j] = v
		}
	}
	return out
}

func (g *goStatus) desc(name string) *prometheus.Desc {
	return prometheus.NewDesc(g.prefix+"_"+strings.ReplaceAll(name, ".", "_"), goStatusHelp[name], nil, nil)
}

func (g *goStatus) Describe(ch chan<- *prometheus.Desc) {
	for name := range goStatusHelp {
		ch <- g.desc(name)
	}
}

func (g *goStatus) Collect(ch chan<- prometheus.Metric) {
	for name, v := range GoStatus() {
		typ := prometheus.GaugeValue
		if goCounters[name] {
			typ = prometheus.CounterValue
		}
		ch <- prometheus.MustNewConstMetric(g.desc(name), typ, v)
	}
}
