package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/stream/runtime"
)

const (
	localBatchSize    = 256 // events per batch handed to a local gate
	localGateCapacity = 8   // batches a gate buffers before producers block
)

// JobResult describes a finished execution.
type JobResult struct {
	Name        string
	Fingerprint string
	Duration    time.Duration
	// JobID and Accumulators are set by ExecuteOn: the job's ID on the
	// cluster and its accumulator results by name (a Collect sink's under
	// its operator ID).
	JobID        string
	Accumulators map[string][]byte
}

// Execute translates the job and runs it in this process, like Flink's
// MiniCluster: every subtask is a goroutine running its chain (see package
// runtime); PIPELINED exchanges are bounded Go channels, BLOCKING ones are
// kept in memory until all producers finished. It returns when every task
// finished, the first task failed (the error names the operator), or ctx
// was cancelled; no goroutine outlives it.
func (e *Environment) Execute(ctx context.Context) (*JobResult, error) {
	p, err := e.Plan()
	if err != nil {
		return nil, err
	}
	if err := p.prepareOutputs(ctx); err != nil {
		return nil, err
	}
	return p.ExecuteLocal(ctx)
}

// ExecuteLocal runs the plan in this process (see Environment.Execute).
func (p *Plan) ExecuteLocal(ctx context.Context) (*JobResult, error) {
	start := time.Now()
	for _, c := range p.env.collects {
		c.reset()
	}
	g := p.Graph
	coords, err := newLocalCoordinators(g)
	if err != nil {
		return nil, fmt.Errorf("job %q: %w", g.Name, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slots := p.localSlots()
	iom := runtime.NewIOManager(p.env.tmpDirs)
	// After the tasks and pumps (deferred before them): no spill file
	// outlives the job, and no page is unmapped while in use.
	defer func() {
		for _, m := range slots {
			_ = m.Close()
		}
		_ = iom.Close()
	}()

	type sub struct {
		gates   []*runtime.LocalGate
		writers []runtime.ResultWriter
	}
	subs := map[jobgraph.VertexID][]*sub{}
	for _, v := range g.Vertices {
		spec := p.Tasks[v.ID]
		counts := make([]int, spec.NumInputs)
		for _, in := range p.Inputs[v.ID] {
			e := g.Edges[in.Edge]
			if e.Distribution == jobgraph.Pointwise {
				counts[in.Input]++
			} else {
				counts[in.Input] += g.Vertex(e.Source).Parallelism
			}
		}
		ss := make([]*sub, v.Parallelism)
		for i := range ss {
			s := &sub{}
			for _, n := range counts {
				s.gates = append(s.gates, runtime.NewLocalGate(n, localGateCapacity))
			}
			ss[i] = s
		}
		subs[v.ID] = ss
	}

	var pumps sync.WaitGroup
	defer pumps.Wait()
	// Wire edges in order, so each producer's writers line up with its
	// TaskSpec.Outputs and each gate's channels are numbered per edge.
	base := map[jobgraph.VertexID][]int{}
	for ei, e := range g.Edges {
		src, dst := g.Vertex(e.Source), g.Vertex(e.Target)
		input := -1
		for _, in := range p.Inputs[dst.ID] {
			if in.Edge == ei {
				input = in.Input
			}
		}
		if base[dst.ID] == nil {
			base[dst.ID] = make([]int, p.Tasks[dst.ID].NumInputs)
		}
		b := base[dst.ID][input]
		pointwise := e.Distribution == jobgraph.Pointwise
		if pointwise {
			base[dst.ID][input]++
		} else {
			base[dst.ID][input] += src.Parallelism
		}
		consumers := subs[dst.ID]
		for ps, producer := range subs[src.ID] {
			switch {
			case e.PartitionType == jobgraph.Pipelined && pointwise:
				producer.writers = append(producer.writers, runtime.NewLocalWriter(ctx,
					[]runtime.LocalTarget{{Gate: consumers[ps].gates[input], Channel: b}}, localBatchSize))
			case e.PartitionType == jobgraph.Pipelined:
				targets := make([]runtime.LocalTarget, len(consumers))
				for cs, c := range consumers {
					targets[cs] = runtime.LocalTarget{Gate: c.gates[input], Channel: b + ps}
				}
				producer.writers = append(producer.writers, runtime.NewLocalWriter(ctx, targets, localBatchSize))
			case pointwise:
				r := runtime.NewBlockingResult(1, 1, p.Tasks[src.ID].Outputs[len(producer.writers)].Codec, slots[ps:ps+1], iom)
				producer.writers = append(producer.writers, r.Writer(0))
				gate := consumers[ps].gates[input]
				pumps.Go(func() { _ = r.Serve(ctx, 0, gate, b, localBatchSize) })
			}
		}
		if e.PartitionType == jobgraph.Blocking && !pointwise {
			r := runtime.NewBlockingResult(src.Parallelism, dst.Parallelism, p.Tasks[src.ID].Outputs[len(subs[src.ID][0].writers)].Codec, slots, iom)
			for ps, producer := range subs[src.ID] {
				producer.writers = append(producer.writers, r.Writer(ps))
			}
			for cs, c := range consumers {
				gate := c.gates[input]
				pumps.Go(func() { _ = r.Serve(ctx, cs, gate, b, localBatchSize) })
			}
		}
	}

	var (
		mu       sync.Mutex
		firstErr error
		tasks    sync.WaitGroup
	)
	for _, v := range g.Vertices {
		spec := p.Tasks[v.ID]
		for i, s := range subs[v.ID] {
			env := runtime.TaskEnv{SubtaskIndex: i, Parallelism: v.Parallelism, MaxParallelism: v.EffectiveMaxParallelism(), Writers: s.writers,
				OperatorEvents: coords.gateway(i), Batch: runtime.BatchMemory{Memory: slots[i], IO: iom}}
			if m := p.env.metrics; m != nil {
				env.Metrics = m.AddGroup(v.Name).AddGroup(strconv.Itoa(i))
			}
			for _, gt := range s.gates {
				env.Gates = append(env.Gates, gt)
			}
			tasks.Go(func() {
				if err := runtime.RunTask(ctx, spec, env); err != nil {
					mu.Lock()
					if firstErr == nil || (isCancel(firstErr) && !isCancel(err)) {
						firstErr = err
					}
					mu.Unlock()
					cancel()
				}
			})
		}
	}
	tasks.Wait()
	cancel()
	pumps.Wait()
	if err := coords.close(); err != nil && firstErr == nil {
		firstErr = err
	}
	res := &JobResult{Name: g.Name, Fingerprint: g.Fingerprint, Duration: time.Since(start)}
	if firstErr != nil {
		return res, fmt.Errorf("job %q failed: %w", g.Name, firstErr)
	}
	return res, nil
}

// localSlots are the local executor's slots' managed memory: as many as
// the job's highest parallelism, sharing WithManagedMemory (each
// runtime.DefaultManagedMemory by default).
func (p *Plan) localSlots() []*runtime.MemoryManager {
	n := 1
	for _, v := range p.Graph.Vertices {
		n = max(n, v.Parallelism)
	}
	per := int64(runtime.DefaultManagedMemory)
	if p.env.managedMemory > 0 {
		per = p.env.managedMemory / int64(n)
	}
	slots := make([]*runtime.MemoryManager, n)
	for i := range slots {
		slots[i] = runtime.NewMemoryManager(per)
	}
	return slots
}

func isCancel(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
