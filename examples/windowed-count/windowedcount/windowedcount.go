// Package windowedcount is the pipeline of the windowed-count example: a
// streaming count per key in tumbling event-time windows over generated
// events that arrive out of order. It lives in its own package so that
// tests can build exactly the pipeline the example runs.
package windowedcount

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/gofl/gofl/stream"
)

// JobName is the name the example registers its job under.
const JobName = "windowed-count"

// Event is one generated event: a key and its event time in milliseconds.
type Event struct {
	Index int64
	Key   string
	Ts    int64
}

// WindowCount is the number of events of one key in one window [Start, End)
// (milliseconds).
type WindowCount struct {
	Key        string
	Start, End int64
	Count      int64
}

// String is the output line: "key window_start window_end count".
func (w WindowCount) String() string {
	return fmt.Sprintf("%s %d %d %d", w.Key, w.Start, w.End, w.Count)
}

// Config describes the generated events and the job.
type Config struct {
	// Events is the number of events generated (indexes 0..Events-1).
	Events int64
	// Keys is the number of distinct keys.
	Keys int
	// Step is the event-time distance between consecutive indexes.
	Step time.Duration
	// OutOfOrderness is the watermark bound; events are delayed by up to
	// this much behind their slot (so they arrive out of order but in time).
	OutOfOrderness time.Duration
	// LateEvery makes every LateEvery-th event (index i with i % LateEvery
	// == LateEvery-1) arrive further behind than the bound: those whose
	// window has fired already are dropped by the window operator. 0 turns
	// late events off.
	LateEvery int64
	// Window is the tumbling window size.
	Window time.Duration
	// Parallelism of the keyed window and the sink; 0 keeps the
	// environment's default.
	Parallelism int
	// SourceParallelism of the generator and the watermark assigner. With
	// 1 (the default, an ordered log like one Kafka partition) which late
	// events are dropped is deterministic; with more, each source subtask
	// has its own watermark and the window sees their minimum, so events
	// within the bound are never dropped but late ones may or may not be.
	SourceParallelism int
	// Output is the directory of the part files; "" prints instead.
	Output string
}

// DefaultConfig is the example's default: 10 000 events over 8 keys, one
// every 250 ms, up to 3 s out of order, every 50th event 3 s + 4 s..19 s
// late, 10 s windows.
func DefaultConfig() Config {
	return Config{Events: 10000, Keys: 8, Step: 250 * time.Millisecond, OutOfOrderness: 3 * time.Second,
		LateEvery: 50, Window: 10 * time.Second, SourceParallelism: 1}
}

// Delay is how far behind its slot (index × Step) event i is generated.
// Within the bound it is a deterministic pseudo-random multiple of Step;
// late events are OutOfOrderness + 1 s + (0..15 s) behind, so some of them
// still find their window open and some do not.
func (c Config) Delay(i int64) time.Duration {
	if c.LateEvery > 0 && i%c.LateEvery == c.LateEvery-1 {
		return c.OutOfOrderness + time.Second + time.Duration((i/c.LateEvery)%16)*time.Second
	}
	slots := int64(c.OutOfOrderness / c.Step)
	if slots <= 0 {
		return 0
	}
	h := uint64(i)*0x9e3779b97f4a7c15 + 0x7f4a7c15
	h ^= h >> 29
	return time.Duration(int64(h%uint64(slots+1))) * c.Step
}

// Epoch is the event time of slot 0: 2024-01-01T00:00:00Z in milliseconds.
const Epoch int64 = 1704067200000

// EventAt is generated event i: its slot is Epoch + i × Step, its event
// time Delay(i) earlier.
func (c Config) EventAt(i int64) Event {
	k := (uint64(i)*2654435761 + uint64(i)/3) % uint64(c.Keys)
	return Event{Index: i, Key: fmt.Sprintf("key-%02d", k), Ts: Epoch + (time.Duration(i)*c.Step - c.Delay(i)).Milliseconds()}
}

// Build adds the pipeline to env: generator → timestamps and
// BoundedOutOfOrderness watermarks → KeyBy(key) → TumblingEventTime window
// counting incrementally (Reduce) → the window's bounds from the result's
// timestamp → text sink (or Print).
func Build(env *stream.Environment, c Config) error {
	if c.Events < 0 || c.Keys < 1 || c.Step <= 0 || c.Window <= 0 || c.OutOfOrderness < 0 || c.LateEvery < 0 {
		return fmt.Errorf("windowed-count: bad configuration %+v", c)
	}
	if c.Parallelism > 0 {
		env.SetParallelism(c.Parallelism)
	}
	srcPar := max(c.SourceParallelism, 1)
	events := stream.Generate(env, c.Events, c.EventAt).Name("Events").SetParallelism(srcPar).
		AssignTimestampsAndWatermarks(stream.BoundedOutOfOrderness(c.OutOfOrderness, func(e Event) int64 { return e.Ts })).
		SetParallelism(srcPar)
	ones := stream.Map(events, func(e Event) WindowCount { return WindowCount{Key: e.Key, Count: 1} }).Name("One").SetParallelism(srcPar)
	size := c.Window.Milliseconds()
	counts := stream.Window(stream.KeyBy(ones, func(w WindowCount) string { return w.Key }), stream.TumblingEventTime(c.Window)).
		Reduce(func(a, b WindowCount) WindowCount { return WindowCount{Key: a.Key, Count: a.Count + b.Count} }).Name("Count")
	// A window result carries the window's MaxTimestamp (End-1).
	lines := stream.Process(counts, func(ctx *stream.ProcessContext, w WindowCount, out stream.Collector[string]) error {
		ts, ok := ctx.Timestamp()
		if !ok {
			return errors.New("window result without a timestamp")
		}
		w.End = ts + 1
		w.Start = w.End - size
		out.Collect(w.String())
		return nil
	}).Name("Format")
	if c.Output != "" {
		lines.WriteAsText(c.Output).Name("Window Counts")
	} else {
		lines.Print().Name("Window Counts")
	}
	return nil
}

// Job is the registered builder: it parses the job arguments into a Config
// and builds it.
func Job(env *stream.Environment, args []string) error {
	c := DefaultConfig()
	fs := flag.NewFlagSet(JobName, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Int64Var(&c.Events, "events", c.Events, "number of events to generate")
	fs.IntVar(&c.Keys, "keys", c.Keys, "number of distinct keys")
	fs.IntVar(&c.Parallelism, "parallelism", c.Parallelism, "parallelism of the window and the sink (0: the default)")
	fs.IntVar(&c.SourceParallelism, "source-parallelism", c.SourceParallelism, "parallelism of the generator and watermark assigner")
	fs.DurationVar(&c.Step, "step", c.Step, "event-time distance between consecutive events")
	fs.DurationVar(&c.OutOfOrderness, "out-of-orderness", c.OutOfOrderness, "bound of the watermark strategy (and of the in-time delays)")
	fs.Int64Var(&c.LateEvery, "late-every", c.LateEvery, "every N-th event arrives later than the bound (0: none)")
	fs.DurationVar(&c.Window, "window", c.Window, "tumbling window size")
	fs.StringVar(&c.Output, "output", "", "output directory (default: print)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w (usage: windowed-count [--events N] [--parallelism P] [--output DIR] ...)", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return Build(env, c)
}
