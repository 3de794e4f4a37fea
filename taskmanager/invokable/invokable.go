// Package invokable holds the task code a TaskExecutor runs, registered by
// name, as Flink's TaskInformation names an invokable class. Until the SDK
// and job runners land, the built-ins are test workloads: "noop", "sleep"
// and "fail-after-n".
//
// A task runs in two phases, as in Flink's Task: the Factory parses the
// vertex's configuration (the JSON in TaskInformation.config) and prepares
// the task while it is still DEPLOYING, so a bad name or configuration fails
// the attempt before it reports INITIALIZING. Invoke then runs it (RUNNING).
// Invoke must return promptly once its context ends; returning nil means the
// task FINISHED. Configuration errors are marked non-recoverable, since a
// retry would fail the same way.
package invokable

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/failure"
)

// Env is what a task knows about itself.
type Env struct {
	JobID         string
	JobVertexID   string
	TaskName      string
	SubtaskIndex  int
	Parallelism   int
	AttemptNumber int
	// Config is the raw TaskInformation.config (JSON for the built-ins);
	// it may be empty.
	Config []byte
}

// Task is one prepared task attempt.
type Task interface {
	// Invoke runs the task until it is done, fails, or ctx ends. It is
	// called once, on the task's own goroutine.
	Invoke(ctx context.Context) error
}

// Factory prepares a task; an error fails the attempt while INITIALIZING.
type Factory func(env Env) (Task, error)

// TaskFunc adapts a function to Task.
type TaskFunc func(ctx context.Context) error

// Invoke calls f.
func (f TaskFunc) Invoke(ctx context.Context) error { return f(ctx) }

var (
	mu       sync.RWMutex
	registry = map[string]Factory{}
)

// Register makes a factory available under name. It panics if the name is
// empty or taken: registrations happen at init and a clash is a bug.
func Register(name string, f Factory) {
	mu.Lock()
	defer mu.Unlock()
	if name == "" || f == nil {
		panic("invokable: Register needs a name and a factory")
	}
	if _, ok := registry[name]; ok {
		panic(fmt.Sprintf("invokable: %q registered twice", name))
	}
	registry[name] = f
}

// Lookup returns the factory registered under name.
func Lookup(name string) (Factory, bool) {
	mu.RLock()
	defer mu.RUnlock()
	f, ok := registry[name]
	return f, ok
}

// Names lists the registered invokables, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Names of the built-in invokables.
const (
	Noop       = "noop"
	Sleep      = "sleep"
	FailAfterN = "fail-after-n"
)

func init() {
	Register(Noop, func(Env) (Task, error) {
		return TaskFunc(func(context.Context) error { return nil }), nil
	})
	Register(Sleep, func(env Env) (Task, error) {
		c, err := parseConfig(env.Config)
		if err != nil {
			return nil, err
		}
		return TaskFunc(func(ctx context.Context) error { return sleep(ctx, c.Duration) }), nil
	})
	Register(FailAfterN, func(env Env) (Task, error) {
		c, err := parseConfig(env.Config)
		if err != nil {
			return nil, err
		}
		return TaskFunc(func(ctx context.Context) error {
			if err := sleep(ctx, c.Duration); err != nil {
				return err
			}
			if c.FailAttempts < 0 || env.AttemptNumber < c.FailAttempts {
				return fmt.Errorf("fail-after-n: attempt %d fails on purpose (failAttempts %d)", env.AttemptNumber, c.FailAttempts)
			}
			return nil
		}), nil
	})
}

// Config is the JSON configuration of the built-ins, e.g.
// {"duration":"500ms","failAttempts":1}. duration takes conf.ParseDuration
// syntax ("500 ms", "2s"; a bare number is milliseconds). failAttempts is
// fail-after-n's n: attempts numbered below it fail, -1 fails every attempt.
type Config struct {
	Duration     time.Duration
	FailAttempts int
}

func parseConfig(raw []byte) (Config, error) {
	var c Config
	if len(strings.TrimSpace(string(raw))) == 0 {
		return c, nil
	}
	var j struct {
		Duration     json.RawMessage `json:"duration"`
		FailAttempts *int            `json:"failAttempts"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return c, failure.NonRecoverable(fmt.Errorf("invalid invokable config %q: %w", raw, err))
	}
	if len(j.Duration) > 0 {
		s := string(j.Duration)
		if uq, err := strconv.Unquote(s); err == nil {
			s = uq
		}
		d, err := conf.ParseDuration(s)
		if err != nil {
			return c, failure.NonRecoverable(fmt.Errorf("invalid invokable config: duration: %w", err))
		}
		c.Duration = d
	}
	if j.FailAttempts != nil {
		c.FailAttempts = *j.FailAttempts
		if c.FailAttempts < -1 {
			return c, failure.NonRecoverable(fmt.Errorf("invalid invokable config: failAttempts %d must be -1 or more", c.FailAttempts))
		}
	}
	return c, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// PanicError is the failure of a task whose invokable panicked.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("task panicked: %v", e.Value) }

// StackTrace is where the panic happened.
func (e *PanicError) StackTrace() string { return string(e.Stack) }

// protect runs fn and turns a panic into a *PanicError with the stack.
func protect[T any](fn func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return fn()
}

// Run runs the named invokable as one task attempt, as a TaskExecutor or a
// job runner does: it builds the task (failures here are reported without
// INITIALIZING, as in Flink's DEPLOYING phase), reports INITIALIZING and
// RUNNING through report, and returns the task's outcome. Panics become
// *PanicError. It blocks until the task ends or ctx is cancelled and the
// task honours it.
func Run(ctx context.Context, name string, env Env, report func(state string)) error {
	factory, ok := Lookup(name)
	if !ok {
		return failure.NonRecoverable(fmt.Errorf("unknown invokable %q (known: %v)", name, Names()))
	}
	task, err := protect(func() (Task, error) { return factory(env) })
	if err != nil {
		return err
	}
	if task == nil {
		return failure.NonRecoverable(fmt.Errorf("invokable %q returned no task", name))
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	report("INITIALIZING")
	report("RUNNING")
	_, err = protect(func() (struct{}, error) { return struct{}{}, task.Invoke(ctx) })
	return err
}
