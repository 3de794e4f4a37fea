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

// rateWindow is how many sampling intervals a time rate spans at most: a
// writer's back-pressured time is counted when its wait for a buffer ends,
// so one interval's share is lumpy.
const rateWindow = 5

// MeterWindow is the span of the record and byte rates, Flink's MeterView
// default (60 s).
const MeterWindow = 60 * time.Second

// RateTracker derives Flink's per-second metrics from successive samples
// of accumulated counters, per attempt: the time shares
// (backPressuredTimeMsPerSecond, idleTimeMsPerSecond, busyTimeMsPerSecond)
// over the last rateWindow sampling intervals, and the record and byte
// rates (numRecordsInPerSecond...) over the last MeterWindow, as Flink's
// MeterView. An attempt's start (StartTimestampMs) counts as a sample of
// zero counters, so records sent before its first sample count. It is not
// safe for concurrent use.
type RateTracker struct {
	last map[string][]sample // oldest first, spanning at most MeterWindow
}

type sample struct {
	at                  time.Time
	backPressured, idle int64
	busy                int64
	// records and bytes in and out.
	recIn, recOut, bytesIn, bytesOut int64
	// zero: the attempt's start, no times to derive shares from.
	zero bool
}

// NewRateTracker returns an empty tracker.
func NewRateTracker() *RateTracker { return &RateTracker{last: map[string][]sample{}} }

// Update sets the rates and the timestamp of every metric in ms, sampled at
// now, from the attempt's earlier samples; an attempt's first sample gets
// no time shares, and record rates only when its start is known. Attempts
// missing from ms are forgotten.
func (r *RateTracker) Update(now time.Time, ms []*pb.TaskIOMetrics) {
	seen := make(map[string][]sample, len(ms))
	for _, m := range ms {
		if m == nil {
			continue
		}
		key := attemptKey(m.Attempt)
		cur := sample{at: now, backPressured: m.BackPressuredTimeMs, idle: m.IdleTimeMs, busy: m.BusyTimeMs,
			recIn: m.NumRecordsIn, recOut: m.NumRecordsOut, bytesIn: m.NumBytesIn, bytesOut: m.NumBytesOut}
		m.TimestampMs = now.UnixMilli()
		hist := r.last[key]
		if len(hist) == 0 && m.StartTimestampMs > 0 && m.StartTimestampMs < now.UnixMilli() {
			hist = []sample{{at: time.UnixMilli(m.StartTimestampMs), zero: true}}
		}
		if prev, ok := timeBase(hist); ok {
			if dt := now.Sub(prev.at).Seconds(); dt > 0 {
				m.BackPressuredTimeMsPerSecond = clampRate(float64(cur.backPressured-prev.backPressured) / dt)
				m.IdleTimeMsPerSecond = clampRate(float64(cur.idle-prev.idle) / dt)
				m.BusyTimeMsPerSecond = clampRate(float64(cur.busy-prev.busy) / dt)
			}
		}
		// The rates' base is the newest sample at least MeterWindow old,
		// or the oldest while the attempt is younger.
		for len(hist) > 1 && now.Sub(hist[1].at) >= MeterWindow {
			hist = hist[1:]
		}
		if len(hist) > 0 {
			prev := hist[0]
			if dt := now.Sub(prev.at).Seconds(); dt > 0 {
				rate := func(c, p int64) float64 { return max(float64(c-p), 0) / dt }
				m.NumRecordsInPerSecond = rate(cur.recIn, prev.recIn)
				m.NumRecordsOutPerSecond = rate(cur.recOut, prev.recOut)
				m.NumBytesInPerSecond = rate(cur.bytesIn, prev.bytesIn)
				m.NumBytesOutPerSecond = rate(cur.bytesOut, prev.bytesOut)
			}
		}
		seen[key] = append(hist, cur)
	}
	r.last = seen
}

// timeBase is the sample the time shares derive from: the oldest of the
// last rateWindow real samples.
func timeBase(hist []sample) (sample, bool) {
	real := hist
	if len(real) > 0 && real[0].zero {
		real = real[1:]
	}
	if len(real) == 0 {
		return sample{}, false
	}
	return real[max(len(real)-rateWindow, 0)], true
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
