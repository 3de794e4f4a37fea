package taskmanager

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gofl/gofl/metrics"
	"github.com/gofl/gofl/rpc/pb"
)

// TaskMetrics is the latest I/O sample of one running task.
type TaskMetrics struct {
	JobID, JobName, TaskName string
	Sample                   *pb.TaskIOMetrics
}

// RunningTaskMetrics returns the latest I/O sample of every running task.
// It runs on the mailbox; any goroutine may call it.
func (te *TaskExecutor) RunningTaskMetrics(ctx context.Context) ([]TaskMetrics, error) {
	return onMailbox(ctx, te, func() ([]TaskMetrics, error) {
		out := make([]TaskMetrics, 0, len(te.tasks))
		for _, t := range te.tasks {
			m := te.taskMetrics(t)
			if m.Attempt == nil {
				m.Attempt = t.attempt
			}
			out = append(out, TaskMetrics{JobID: t.jobID, JobName: t.jobName, TaskName: t.name, Sample: m})
		}
		return out, nil
	})
}

// MetricsCollector exports the running tasks' I/O metrics as Flink's
// task scope (flink_taskmanager_job_task_*), read from the runners'
// latest samples when scraped.
func (te *TaskExecutor) MetricsCollector() prometheus.Collector { return taskCollector{te} }

type taskCollector struct{ te *TaskExecutor }

var taskLabels = []string{"job_id", "job_name", "task_name", "task_id", "subtask_index", "task_attempt_num"}

type taskMetric struct {
	name, help string
	typ        prometheus.ValueType
	value      func(*pb.TaskIOMetrics) float64
}

var taskMetricDefs = []taskMetric{
	{"numRecordsIn", "Records this task received.", prometheus.CounterValue, func(m *pb.TaskIOMetrics) float64 { return float64(m.NumRecordsIn) }},
	{"numRecordsOut", "Records this task emitted.", prometheus.CounterValue, func(m *pb.TaskIOMetrics) float64 { return float64(m.NumRecordsOut) }},
	{"numBytesIn", "Bytes this task received.", prometheus.CounterValue, func(m *pb.TaskIOMetrics) float64 { return float64(m.NumBytesIn) }},
	{"numBytesOut", "Bytes this task emitted.", prometheus.CounterValue, func(m *pb.TaskIOMetrics) float64 { return float64(m.NumBytesOut) }},
	{"busyTimeMsPerSecond", "Milliseconds per second the task was busy.", prometheus.GaugeValue, func(m *pb.TaskIOMetrics) float64 { return m.BusyTimeMsPerSecond }},
	{"backPressuredTimeMsPerSecond", "Milliseconds per second the task was back-pressured.", prometheus.GaugeValue, func(m *pb.TaskIOMetrics) float64 { return m.BackPressuredTimeMsPerSecond }},
	{"idleTimeMsPerSecond", "Milliseconds per second the task was idle.", prometheus.GaugeValue, func(m *pb.TaskIOMetrics) float64 { return m.IdleTimeMsPerSecond }},
	{"numRecordsInPerSecond", "Records received per second over the last minute.", prometheus.GaugeValue, func(m *pb.TaskIOMetrics) float64 { return m.NumRecordsInPerSecond }},
	{"numRecordsOutPerSecond", "Records emitted per second over the last minute.", prometheus.GaugeValue, func(m *pb.TaskIOMetrics) float64 { return m.NumRecordsOutPerSecond }},
	{"numBytesInPerSecond", "Bytes received per second over the last minute.", prometheus.GaugeValue, func(m *pb.TaskIOMetrics) float64 { return m.NumBytesInPerSecond }},
	{"numBytesOutPerSecond", "Bytes emitted per second over the last minute.", prometheus.GaugeValue, func(m *pb.TaskIOMetrics) float64 { return m.NumBytesOutPerSecond }},
	{"currentInputWatermark", "The task's combined input watermark, epoch ms.", prometheus.GaugeValue, func(m *pb.TaskIOMetrics) float64 { return float64(m.CurrentInputWatermark) }},
	{"currentOutputWatermark", "The last watermark the task emitted, epoch ms.", prometheus.GaugeValue, func(m *pb.TaskIOMetrics) float64 { return float64(m.CurrentOutputWatermark) }},
}

// userLabels are the labels of Flink's operator scope.
var userLabels = append(slices.Clone(taskLabels), "operator_name")

// userDesc is the descriptor of a user metric: Flink's operator scope,
// the name's invalid characters (the group dots) as "_".
func userDesc(name string) *prometheus.Desc {
	return prometheus.NewDesc(metrics.Name(metrics.TaskManagerScope, "job", "task", "operator", metrics.Sanitize(name)),
		"User metric "+name+".", userLabels, nil)
}

// userMetric is a user metric as Prometheus': counters and gauges as
// theirs, a histogram as a summary of its window's quantiles (its sum
// is mean × count).
func userMetric(u *pb.UserMetric, labels []string) (prometheus.Metric, error) {
	labels = append(slices.Clone(labels), u.OperatorName)
	switch u.Type {
	case pb.UserMetric_TYPE_COUNTER:
		return prometheus.NewConstMetric(userDesc(u.Name), prometheus.CounterValue, u.Value, labels...)
	case pb.UserMetric_TYPE_HISTOGRAM:
		h := u.Histogram
		return prometheus.NewConstSummary(userDesc(u.Name), uint64(h.GetCount()), h.GetMean()*float64(h.GetCount()),
			map[float64]float64{0.5: h.GetP50(), 0.95: h.GetP95(), 0.99: h.GetP99()}, labels...)
	default:
		return prometheus.NewConstMetric(userDesc(u.Name), prometheus.GaugeValue, u.Value, labels...)
	}
}

func taskDesc(d taskMetric) *prometheus.Desc {
	return prometheus.NewDesc(metrics.Name(metrics.TaskManagerScope, "job", "task", d.name), d.help, taskLabels, nil)
}

func (c taskCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range taskMetricDefs {
		ch <- taskDesc(d)
	}
}

func (c taskCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tasks, err := c.te.RunningTaskMetrics(ctx)
	if err != nil {
		return // shutting down: no task metrics
	}
	for _, t := range tasks {
		a := t.Sample.Attempt
		labels := []string{t.JobID, t.JobName, t.TaskName, a.GetJobVertexId(),
			strconv.Itoa(int(a.GetSubtaskIndex())), strconv.Itoa(int(a.GetAttemptNumber()))}
		for _, d := range taskMetricDefs {
			ch <- prometheus.MustNewConstMetric(taskDesc(d), d.typ, d.value(t.Sample), labels...)
		}
		for _, u := range t.Sample.UserMetrics {
			if m, err := userMetric(u, labels); err == nil {
				ch <- m
			}
		}
	}
}
