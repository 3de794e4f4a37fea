package stream

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Builder builds a job's stream graph into env from the job's arguments. It
// must be deterministic: the runner re-runs it with the same arguments to
// get the same operators (with their closures) and checks the fingerprint.
type Builder func(env *Environment, args []string) error

var (
	registryMu sync.Mutex
	builders   = map[string]Builder{}
	plans      = map[string]*Plan{}
)

// RegisterJob registers a job builder by name, normally from an init
// function. It panics when the name is taken.
func RegisterJob(name string, b Builder) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := builders[name]; dup {
		panic(fmt.Sprintf("stream: job %q registered twice", name))
	}
	builders[name] = b
}

// Jobs lists the registered job names.
func Jobs() []string {
	registryMu.Lock()
	defer registryMu.Unlock()
	names := make([]string, 0, len(builders))
	for n := range builders {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// BuildJob runs the named builder in a new environment named after the job.
// The environment variable GOFL_PARALLELISM (EnvParallelism), if set, is
// the default parallelism before the builder and opts apply theirs.
func BuildJob(name string, args []string, opts ...Option) (*Environment, error) {
	registryMu.Lock()
	b, ok := builders[name]
	registryMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("stream: no job %q is registered (have %s)", name, strings.Join(Jobs(), ", "))
	}
	base := []Option{WithJobName(name)}
	if v := os.Getenv(EnvParallelism); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("stream: %s=%q is not a parallelism (a positive integer)", EnvParallelism, v)
		}
		base = append(base, WithParallelism(n))
	}
	env := NewEnvironment(append(base, opts...)...)
	env.job, env.args = name, append([]string(nil), args...)
	if err := b(env, args); err != nil {
		return nil, fmt.Errorf("job %q: builder: %w", name, err)
	}
	return env, nil
}

// PlanJob builds and translates the named job, once per process and
// arguments: the runner's registry from vertex and operator IDs to the
// operators (with closures) this process built.
func PlanJob(name string, args []string) (*Plan, error) {
	key := name + "\x00" + strings.Join(args, "\x00")
	registryMu.Lock()
	p := plans[key]
	registryMu.Unlock()
	if p != nil {
		return p, nil
	}
	env, err := BuildJob(name, args)
	if err != nil {
		return nil, err
	}
	if p, err = env.Plan(); err != nil {
		return nil, fmt.Errorf("job %q: %w", name, err)
	}
	registryMu.Lock()
	if prev := plans[key]; prev != nil {
		p = prev
	} else {
		plans[key] = p
	}
	registryMu.Unlock()
	return p, nil
}

// CheckFingerprint fails when the plan differs from the one deployed: the
// builder is not deterministic (it depends on time, randomness, the
// environment or map order) or the binary changed.
func (p *Plan) CheckFingerprint(deployed string) error {
	if p.Graph.Fingerprint != deployed {
		return fmt.Errorf("stream: job %q rebuilt to fingerprint %s, but %s was deployed: the job builder is not deterministic or the binary changed",
			p.Graph.Name, p.Graph.Fingerprint, deployed)
	}
	return nil
}

// RunJob builds the named job and executes it locally.
func RunJob(ctx context.Context, name string, args []string, opts ...Option) (*JobResult, error) {
	env, err := BuildJob(name, args, opts...)
	if err != nil {
		return nil, err
	}
	return env.Execute(ctx)
}
