package runner

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/rpc/pb"
)

// DefaultMetricsInterval is how often task metrics are sampled unless the
// TaskManager asks for another interval.
const DefaultMetricsInterval = time.Second

// minMetricsInterval bounds how often a runner samples.
const minMetricsInterval = 10 * time.Millisecond

// MetricsExecutor is an Executor that keeps I/O metrics of its tasks.
// Executors without them still run; their tasks report no metrics.
type MetricsExecutor interface {
	Executor
	// TaskMetrics returns the accumulated counters of every running task:
	// records and bytes in and out and the back-pressured, idle and busy
	// times in ms. The runner derives the per-second rates and sets the
	// timestamp. It is called from the metrics stream's goroutine.
	TaskMetrics() []*pb.TaskIOMetrics
}

// rateWindow is how many sampling intervals a rate spans at most: a
// writer's back-pressured time is counted when its wait for a buffer ends,
// so one interval's share is lumpy.
const rateWindow = 5

// RateTracker derives Flink's per-second time metrics
// (backPressuredTimeMsPerSecond, idleTimeMsPerSecond, busyTimeMsPerSecond)
// from successive samples of accumulated times, per attempt, over the last
// rateWindow sampling intervals. It is not safe for concurrent use.
type RateTracker struct {
	last map[string][]sample // oldest first, at most rateWindow
}

type sample struct {
	at                  time.Time
	backPressured, idle int64
	busy                int64
}

// NewRateTracker returns an empty tracker.
func NewRateTracker() *RateTracker { return &RateTracker{last: map[string][]sample{}} }

// Update sets the rates and the timestamp of every metric in ms, sampled at
// now, from the attempt's earlier samples; an attempt's first sample gets
// no rates. Attempts missing from ms are forgotten.
func (r *RateTracker) Update(now time.Time, ms []*pb.TaskIOMetrics) {
	seen := make(map[string][]sample, len(ms))
	for _, m := range ms {
		if m == nil {
			continue
		}
		key := attemptKey(m.Attempt)
		cur := sample{at: now, backPressured: m.BackPressuredTimeMs, idle: m.IdleTimeMs, busy: m.BusyTimeMs}
		m.TimestampMs = now.UnixMilli()
		hist := r.last[key]
		if len(hist) > 0 {
			prev := hist[0]
			if dt := now.Sub(prev.at).Seconds(); dt > 0 {
				m.BackPressuredTimeMsPerSecond = clampRate(float64(cur.backPressured-prev.backPressured) / dt)
				m.IdleTimeMsPerSecond = clampRate(float64(cur.idle-prev.idle) / dt)
				m.BusyTimeMsPerSecond = clampRate(float64(cur.busy-prev.busy) / dt)
			}
		}
		hist = append(hist, cur)
		if len(hist) > rateWindow {
			hist = hist[len(hist)-rateWindow:]
		}
		seen[key] = hist
	}
	r.last = seen
}

// clampRate keeps a rate within [0, 1000] ms per second: timers of
// different goroutines overlap a little.
func clampRate(v float64) float64 { return min(max(v, 0), 1000) }

func (s *server) WatchTaskMetrics(req *pb.WatchTaskMetricsRequest, stream pb.JobRunnerService_WatchTaskMetricsServer) error {
	mex, ok := s.ex.(MetricsExecutor)
	if !ok { // nothing to report
		select {
		case <-stream.Context().Done():
		case <-s.stopping:
		}
		return nil
	}
	interval := time.Duration(req.IntervalMs) * time.Millisecond
	if interval <= 0 {
		interval = DefaultMetricsInterval
	}
	interval = max(interval, minMetricsInterval)
	rates := NewRateTracker()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		ms := mex.TaskMetrics()
		rates.Update(time.Now(), ms)
		if err := stream.Send(&pb.TaskMetricsReport{Tasks: ms}); err != nil {
			return err
		}
		select {
		case <-tick.C:
		case <-stream.Context().Done():
			return nil
		case <-s.stopping:
			return nil
		}
	}
}

// watchMetrics keeps the runner's metrics stream open and remembers the
// latest sample of every running task.
func (p *Process) watchMetrics(ctx context.Context, interval time.Duration) {
	defer p.watchWG.Done()
	stream, err := p.client.WatchTaskMetrics(ctx, &pb.WatchTaskMetricsRequest{IntervalMs: interval.Milliseconds()})
	if err != nil {
		return
	}
	for {
		rep, err := stream.Recv()
		if err != nil {
			if status.Code(err) == codes.Unimplemented {
				p.log.Debug().Msg("the job runner reports no task metrics")
			} else if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				p.log.Debug().Err(err).Msg("task metrics stream ended")
			}
			return
		}
		latest := make(map[string]*pb.TaskIOMetrics, len(rep.Tasks))
		for _, m := range rep.Tasks {
			latest[attemptKey(m.Attempt)] = m
		}
		p.mu.Lock()
		p.metrics = latest
		p.mu.Unlock()
	}
}

// Metrics returns the latest sample of a running attempt's I/O metrics, or
// nil if the runner reported none (yet). The result must not be modified.
func (p *Process) Metrics(attempt *pb.ExecutionAttemptID) *pb.TaskIOMetrics {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.metrics[attemptKey(attempt)]
}
