package stream

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/gofl/gofl/jobgraph"
)

// RuntimeMode is Flink's execution.runtime-mode.
type RuntimeMode int

const (
	// Streaming runs every operator at once with PIPELINED exchanges;
	// watermarks drive event time and keyed aggregations emit per update.
	Streaming RuntimeMode = iota
	// Batch requires bounded sources and makes every exchange BLOCKING.
	// As in Flink, watermark strategies are ignored (event time jumps to
	// +inf at the end of input, firing all windows), and keyed Reduce and
	// Aggregate emit only the final value per key.
	Batch
)

func (m RuntimeMode) String() string {
	if m == Batch {
		return "BATCH"
	}
	return "STREAMING"
}

// Environment collects a job's transformations (the stream graph) and
// translates or executes them. An Environment is not safe for concurrent use.
type Environment struct {
	name           string
	parallelism    int
	maxParallelism int
	mode           RuntimeMode
	chaining       bool
	bufferTimeout  time.Duration
	stdout         io.Writer
	stdoutMu       *sync.Mutex
	nodes          []*node
	collects       []collectedSink
	err            error
	// job and args are the registered job and its arguments, set by
	// BuildJob: what a cluster's runners rebuild the job from.
	job  string
	args []string
	// metrics receives the user metrics of the local executor's tasks.
	metrics MetricGroup
	// managedMemory and tmpDirs are the local executor's managed memory
	// (split among its slots) and spill directories.
	managedMemory int64
	tmpDirs       []string
}

// Option configures a new Environment.
type Option func(*Environment)

// WithParallelism sets the default parallelism (see SetParallelism).
func WithParallelism(n int) Option { return func(e *Environment) { e.SetParallelism(n) } }

// WithMaxParallelism sets the default max parallelism.
func WithMaxParallelism(n int) Option { return func(e *Environment) { e.SetMaxParallelism(n) } }

// WithRuntimeMode sets Streaming or Batch.
func WithRuntimeMode(m RuntimeMode) Option { return func(e *Environment) { e.SetRuntimeMode(m) } }

// WithJobName names the job (the JobGraph's Name).
func WithJobName(name string) Option { return func(e *Environment) { e.name = name } }

// WithMetrics makes the local executor register the operators' user
// metrics in g, scoped "<task>.<subtask>.<operator>.<name>" (by default
// each task keeps its own in-memory group). On a cluster the TaskManager
// decides where they go.
func WithMetrics(g MetricGroup) Option { return func(e *Environment) { e.metrics = g } }

// WithManagedMemory sets the local executor's managed memory
// (taskmanager.memory.managed.size of a cluster), in bytes: it is divided
// among as many slots as the job's highest parallelism, subtask i of every
// task using slot i's, as on a cluster. Batch operators that buffer (sorts,
// joins, blocking exchanges) spill to disk past it. Default
// runtime.DefaultManagedMemory per slot.
func WithManagedMemory(bytes int64) Option { return func(e *Environment) { e.managedMemory = bytes } }

// WithTmpDirs sets the local executor's spill directories (io.tmp.dirs;
// default os.TempDir()). Spill files go into a private directory under
// each, removed when the job ends, however it ends.
func WithTmpDirs(dirs ...string) Option { return func(e *Environment) { e.tmpDirs = dirs } }

// WithStdout redirects Print sinks (default os.Stdout).
func WithStdout(w io.Writer) Option { return func(e *Environment) { e.stdout = w } }

// NewEnvironment returns an empty Environment: parallelism 1 (not the
// number of CPUs as in Flink's local environment: the plan must be the same
// on every machine that builds it), max parallelism derived per operator,
// streaming mode, chaining on.
func NewEnvironment(opts ...Option) *Environment {
	e := &Environment{name: "gofl job", parallelism: 1, chaining: true, stdout: os.Stdout, stdoutMu: &sync.Mutex{}}
	for _, o := range opts {
		o(e)
	}
	return e
}

// SetParallelism sets the default parallelism of operators that set none.
func (e *Environment) SetParallelism(n int) *Environment {
	if n < 1 {
		e.fail(fmt.Errorf("parallelism %d must be at least 1", n))
		return e
	}
	e.parallelism = n
	return e
}

// SetMaxParallelism sets the default max parallelism (number of key
// groups); 0 derives it from the parallelism as Flink does.
func (e *Environment) SetMaxParallelism(n int) *Environment {
	if n < 0 || n > jobgraph.MaxMaxParallelism {
		e.fail(fmt.Errorf("max parallelism %d must be in 0..%d", n, jobgraph.MaxMaxParallelism))
		return e
	}
	e.maxParallelism = n
	return e
}

// SetRuntimeMode chooses Streaming or Batch execution.
func (e *Environment) SetRuntimeMode(m RuntimeMode) *Environment { e.mode = m; return e }

// RuntimeMode is the chosen runtime mode.
func (e *Environment) RuntimeMode() RuntimeMode { return e.mode }

// SetBufferTimeout is accepted for Flink compatibility. Local exchanges
// hand on a batch when it is full or when the producing task would
// otherwise wait, so records are never held back by an idle producer.
func (e *Environment) SetBufferTimeout(d time.Duration) *Environment { e.bufferTimeout = d; return e }

// DisableOperatorChaining turns chaining off: every operator becomes its
// own vertex.
func (e *Environment) DisableOperatorChaining() *Environment { e.chaining = false; return e }

// SetJobName names the job.
func (e *Environment) SetJobName(name string) *Environment { e.name = name; return e }

// fail records the first builder error; Plan and Execute report it.
func (e *Environment) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

func (e *Environment) newNode(kind, name string) *node {
	n := &node{id: len(e.nodes), kind: kind, name: name, chaining: chainAlways, params: map[string]any{}}
	e.nodes = append(e.nodes, n)
	return n
}
