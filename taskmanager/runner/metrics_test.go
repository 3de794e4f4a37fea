package runner

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/rpc/pb"
)

func TestRateTrackerDerivesPerSecondRates(t *testing.T) {
	a := &pb.ExecutionAttemptID{Graph: 1, JobVertexId: "v"}
	b := &pb.ExecutionAttemptID{Graph: 1, JobVertexId: "w"}
	r := NewRateTracker()
	t0 := time.UnixMilli(1_000_000)
	first := []*pb.TaskIOMetrics{{Attempt: a, BackPressuredTimeMs: 100, IdleTimeMs: 50, BusyTimeMs: 10}}
	r.Update(t0, first)
	if m := first[0]; m.BackPressuredTimeMsPerSecond != 0 || m.TimestampMs != t0.UnixMilli() {
		t.Fatalf("first sample: %v", m)
	}
	// Two seconds later: 1600 ms more back pressure, 200 ms idle, 200 ms busy.
	second := []*pb.TaskIOMetrics{
		{Attempt: a, BackPressuredTimeMs: 1700, IdleTimeMs: 250, BusyTimeMs: 210},
		{Attempt: b, BackPressuredTimeMs: 5000},
	}
	r.Update(t0.Add(2*time.Second), second)
	if m := second[0]; m.BackPressuredTimeMsPerSecond != 800 || m.IdleTimeMsPerSecond != 100 || m.BusyTimeMsPerSecond != 100 {
		t.Fatalf("rates %v", m)
	}
	if m := second[1]; m.BackPressuredTimeMsPerSecond != 0 {
		t.Fatalf("a new attempt's first sample has no rate: %v", m)
	}
	// Overlapping timers never yield more than 1000 ms per second; counters
	// going backwards (a new attempt under the same key) never below zero.
	third := []*pb.TaskIOMetrics{{Attempt: a, BackPressuredTimeMs: 9000, IdleTimeMs: 0}}
	r.Update(t0.Add(3*time.Second), third)
	if m := third[0]; m.BackPressuredTimeMsPerSecond != 1000 || m.IdleTimeMsPerSecond != 0 {
		t.Fatalf("clamped rates %v", m)
	}
	// Rates span the last rateWindow intervals: one second of 1000 ms back
	// pressure after seconds without any is a fifth.
	r = NewRateTracker()
	for i := 0; i <= rateWindow; i++ {
		r.Update(t0.Add(time.Duration(i)*time.Second), []*pb.TaskIOMetrics{{Attempt: a, BackPressuredTimeMs: 0}})
	}
	m := &pb.TaskIOMetrics{Attempt: a, BackPressuredTimeMs: 1000}
	r.Update(t0.Add(time.Duration(rateWindow+1)*time.Second), []*pb.TaskIOMetrics{m})
	if want := 1000.0 / rateWindow; m.BackPressuredTimeMsPerSecond != want {
		t.Fatalf("windowed rate %v, want %v", m.BackPressuredTimeMsPerSecond, want)
	}
	// b vanished: it is forgotten.
	if _, ok := r.last[attemptKey(b)]; ok {
		t.Fatal("a finished attempt is still tracked")
	}
}

func TestRunnerStreamsTaskMetrics(t *testing.T) {
	p, err := Start(context.Background(), Spec{JobID: "job1", Binary: testRunner, Fingerprint: "fp1",
		Dir: shortDir(t), StartTimeout: startTimeout, MetricsInterval: 20 * time.Millisecond}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(10 * time.Second) })
	a, ch := submit(t, p, 1, "sleep", `{"duration":"1h"}`)
	states(t, ch, 2)
	deadline := time.Now().Add(waitLimit)
	for p.Metrics(a) == nil {
		if time.Now().After(deadline) {
			t.Fatal("no metrics of the running task")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if m := p.Metrics(a); m.TimestampMs == 0 || m.NumRecordsIn != 0 {
		t.Fatalf("built-in task metrics %v", m)
	}
	if err := p.Cancel(context.Background(), "job1", a); err != nil {
		t.Fatal(err)
	}
	st := states(t, ch, 1)[0]
	if st.State != "CANCELED" || st.Metrics == nil || attemptKey(st.Metrics.Attempt) != attemptKey(a) {
		t.Fatalf("final state %v: want CANCELED with final metrics", st)
	}
	for deadline := time.Now().Add(waitLimit); p.Metrics(a) != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("an ended task's metrics are still reported")
		}
	}
	// The open metrics stream does not hold up the runner's shutdown: held
	// up, Stop would wait out the grace period before signalling.
	const grace = 2 * waitLimit
	start := time.Now()
	p.Stop(grace)
	if d := time.Since(start); d >= grace {
		t.Errorf("stopping the runner took %v, the whole grace period", d)
	}
}

// The record and byte rates are MeterView's: counts over the last minute
// (or since the attempt's start, which counts as zero), so the rate times
// its span gives back the records counted in it.
func TestRateTrackerRecordRates(t *testing.T) {
	a := &pb.ExecutionAttemptID{Graph: 1, JobVertexId: "v"}
	r := NewRateTracker()
	t0 := time.UnixMilli(1_000_000)
	// Records sent before the first sample count from the start.
	m := &pb.TaskIOMetrics{Attempt: a, StartTimestampMs: t0.UnixMilli(), NumRecordsOut: 500, NumBytesOut: 5000}
	r.Update(t0.Add(2*time.Second), []*pb.TaskIOMetrics{m})
	if m.NumRecordsOutPerSecond != 250 || m.NumBytesOutPerSecond != 2500 || m.NumRecordsInPerSecond != 0 {
		t.Fatalf("rates since the start %v", m)
	}
	if m.BusyTimeMsPerSecond != 0 {
		t.Fatalf("time shares from the first sample: %v", m)
	}
	// 100 records a second, sampled every second, for two minutes: the
	// rate is 100 and, past the first minute, spans exactly MeterWindow.
	var count int64 = 500
	for i := 3; i <= 122; i++ {
		count += 100
		m = &pb.TaskIOMetrics{Attempt: a, StartTimestampMs: t0.UnixMilli(), NumRecordsIn: count - 500, NumRecordsOut: count}
		r.Update(t0.Add(time.Duration(i)*time.Second), []*pb.TaskIOMetrics{m})
		if i > 62 && m.NumRecordsOutPerSecond != 100 {
			t.Fatalf("second %d: rate %v, want 100", i, m.NumRecordsOutPerSecond)
		}
		if i > 62 && m.NumRecordsInPerSecond*MeterWindow.Seconds() != 6000 {
			t.Fatalf("second %d: in-rate %v spans no minute", i, m.NumRecordsInPerSecond)
		}
	}
	if n := len(r.last[attemptKey(a)]); n > int(MeterWindow/time.Second)+2 {
		t.Fatalf("%d samples kept for a one-minute window", n)
	}
	// The source stops: the rate decays over the window, to zero.
	for i := 123; i <= 184; i++ {
		m = &pb.TaskIOMetrics{Attempt: a, StartTimestampMs: t0.UnixMilli(), NumRecordsOut: count}
		r.Update(t0.Add(time.Duration(i)*time.Second), []*pb.TaskIOMetrics{m})
	}
	if m.NumRecordsOutPerSecond != 0 {
		t.Fatalf("rate a minute after the last record: %v", m.NumRecordsOutPerSecond)
	}
}
