package stream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/jobmanager/failover"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/stream/codec"
	"github.com/gofl/gofl/stream/runtime"
	"github.com/gofl/gofl/taskmanager/network"
	"github.com/gofl/gofl/taskmanager/runner"
)

// Task states reported to the TaskManager.
const (
	stateInitializing = "INITIALIZING"
	stateRunning      = "RUNNING"
	stateFinished     = "FINISHED"
	stateFailed       = "FAILED"
	stateCanceled     = "CANCELED"
)

// kindWatermark is the network event carrying a watermark (8 bytes, big
// endian). End of input is the network's EndOfPartition.
const kindWatermark = network.FirstCustomKind

// netBatchSize is how many events a network gate hands to the task at once.
const netBatchSize = 256

// clusterExecutor is the SDK's runner.Executor: it runs the tasks the
// TaskManager deploys to this runner with the operator chains this process
// built, their exchanges on the network data plane.
type clusterExecutor struct {
	plan     *Plan
	shuffle  *network.ShuffleEnvironment
	selfAddr string
	log      zerolog.Logger
	results  map[jobgraph.ResultID]int // result ID -> edge index

	mu     sync.Mutex
	tasks  map[string]*clusterTask
	closed bool
	wg     sync.WaitGroup
}

type clusterTask struct {
	cancel   context.CancelCauseFunc
	canceled bool
	io       taskIO
}

// taskIO is what a task's I/O metrics are sampled from: its partitions and
// gates, set once they exist.
type taskIO struct {
	attempt *pb.ExecutionAttemptID
	start   time.Time
	mu      sync.Mutex
	parts   []*network.ResultPartition
	gates   []*network.InputGate
}

// metrics sums the counters of the task's partitions and gates. Idle time
// is the longest any gate waited for data; busy time is the rest of the
// task's run time that was neither idle nor back-pressured.
func (tio *taskIO) metrics(now time.Time) *pb.TaskIOMetrics {
	m := &pb.TaskIOMetrics{Attempt: tio.attempt}
	tio.mu.Lock()
	defer tio.mu.Unlock()
	for _, p := range tio.parts {
		pm := p.Metrics()
		m.NumRecordsOut += pm.NumRecordsOut
		m.NumBytesOut += pm.NumBytesOut
		m.BackPressuredTimeMs += pm.BackPressuredTimeMs
	}
	for _, g := range tio.gates {
		gm := g.Metrics()
		m.NumRecordsIn += gm.NumRecordsIn
		m.NumBytesIn += gm.NumBytesIn
		m.IdleTimeMs = max(m.IdleTimeMs, gm.IdleTimeMs)
	}
	if !tio.start.IsZero() {
		m.BusyTimeMs = max(now.Sub(tio.start).Milliseconds()-m.IdleTimeMs-m.BackPressuredTimeMs, 0)
	}
	return m
}

func newClusterExecutor(p *Plan, shuffle *network.ShuffleEnvironment, selfAddr string, log zerolog.Logger) *clusterExecutor {
	ex := &clusterExecutor{plan: p, shuffle: shuffle, selfAddr: selfAddr, log: log,
		results: map[jobgraph.ResultID]int{}, tasks: map[string]*clusterTask{}}
	for i := range p.Graph.Edges {
		ex.results[p.Graph.ResultIDOf(i)] = i
	}
	return ex
}

func attemptString(a *pb.ExecutionAttemptID) string {
	return fmt.Sprintf("%s#%d.%d@%x", a.GetJobVertexId(), a.GetSubtaskIndex(), a.GetAttemptNumber(), a.GetGraph())
}

// partitionID is the network ID of a result partition: the
// "result[partition]@attempt" form the JobMaster parses out of a
// partition-data-missing failure.
func partitionID(result string, index int32, producer *pb.ExecutionAttemptID) network.ResultPartitionID {
	return network.ResultPartitionID(fmt.Sprintf("%s[%d]@%s", result, index, attemptString(producer)))
}

// Submit implements runner.Executor.
func (ex *clusterExecutor) Submit(_ context.Context, req *pb.SubmitTaskRequest, report func(*pb.RunnerTaskState)) error {
	tdd := req.GetTdd()
	ti := tdd.GetTaskInformation()
	if ti == nil {
		return errors.New("the deployment has no task information")
	}
	vid := jobgraph.VertexID(ti.JobVertexId)
	spec := ex.plan.Tasks[vid]
	if spec == nil {
		return fmt.Errorf("job %q has no vertex %s (%q) in this binary's plan", ex.plan.Graph.Name, vid, ti.TaskName)
	}
	key := attemptString(tdd.Attempt)
	ctx, cancel := context.WithCancelCause(context.Background())
	t := &clusterTask{cancel: cancel, io: taskIO{attempt: tdd.Attempt, start: time.Now()}}
	ex.mu.Lock()
	switch {
	case ex.closed:
		ex.mu.Unlock()
		cancel(nil)
		return errors.New("the runner is shutting down")
	case ex.tasks[key] != nil:
		ex.mu.Unlock()
		cancel(nil)
		return fmt.Errorf("task %s is already running", key)
	}
	ex.tasks[key] = t
	ex.wg.Add(1)
	ex.mu.Unlock()
	go func() {
		defer ex.wg.Done()
		acc := map[string][]byte{}
		err := ex.runTask(ctx, req, vid, spec, &t.io, acc, func(state string) {
			report(&pb.RunnerTaskState{Attempt: tdd.Attempt, State: state})
		})
		if err == nil {
			if cerr := runner.CheckAccumulators(acc); cerr != nil {
				err = failover.NonRecoverable(fmt.Errorf("task %q: %w", ti.TaskName, cerr))
			}
		}
		ex.mu.Lock()
		delete(ex.tasks, key)
		canceled := t.canceled
		ex.mu.Unlock()
		cancel(nil)
		st := &pb.RunnerTaskState{Attempt: tdd.Attempt, Metrics: t.io.metrics(time.Now())}
		switch {
		case canceled:
			st.State = stateCanceled
		case err == nil:
			st.State, st.Accumulators = stateFinished, acc
		default:
			st.State, st.Failure = stateFailed, failover.Encode(err)
			ex.log.Warn().Err(err).Str("attempt", key).Msg("task failed")
		}
		report(st)
	}()
	return nil
}

// runTask sets up the task's partitions and gates, runs its chain and
// tears the gates down; it returns the task's failure.
// Its operators' accumulator results are added to acc.
func (ex *clusterExecutor) runTask(ctx context.Context, req *pb.SubmitTaskRequest, vid jobgraph.VertexID, spec *runtime.TaskSpec, tio *taskIO, acc map[string][]byte, state func(string)) (err error) {
	tdd := req.Tdd
	ti := tdd.TaskInformation
	state(stateInitializing)
	// The task's context fails with a gate's error too; writers blocked on
	// back pressure then stop as well.
	taskCtx, failWith := context.WithCancelCause(ctx)
	defer failWith(nil)
	env := runtime.TaskEnv{SubtaskIndex: int(tdd.Attempt.SubtaskIndex), Parallelism: int(ti.NumberOfSubtasks), MaxParallelism: int(ti.MaxParallelism),
		Accumulate: func(name string, v []byte) { acc[name] = append(acc[name], v...) }}

	// Produced partitions, one per output of the chain.
	var parts []*network.ResultPartition
	defer func() {
		if err != nil { // a failed or cancelled producer's data is useless
			for _, p := range parts {
				p.Release()
			}
		}
	}()
	outEdges := ex.plan.Outputs[vid]
	for i, o := range spec.Outputs {
		result := ex.plan.Graph.ResultIDOf(outEdges[i])
		var rp *pb.ResultPartitionDeploymentDescriptor
		for _, p := range tdd.ProducedPartitions {
			if jobgraph.ResultID(p.ResultId) == result {
				rp = p
			}
		}
		if rp == nil {
			return failover.NonRecoverable(fmt.Errorf("the deployment of %q produces no result %s", ti.TaskName, result))
		}
		typ := network.Pipelined
		if rp.PartitionType == pb.ResultPartitionType_RESULT_PARTITION_TYPE_BLOCKING {
			typ = network.Blocking
		}
		p, err := ex.shuffle.CreateResultPartition(taskCtx, partitionID(rp.ResultId, rp.PartitionIndex, tdd.Attempt), typ, int(rp.NumberOfSubpartitions))
		if err != nil {
			return failover.EnvironmentError(err)
		}
		parts = append(parts, p)
		tio.mu.Lock()
		tio.parts = append(tio.parts, p)
		tio.mu.Unlock()
		env.Writers = append(env.Writers, &netWriter{p: p, c: o.Codec})
	}

	// Input gates, one per logical input, with the channels of every
	// consumed partition of every edge into it.
	specs := make([][]network.InputChannelSpec, spec.NumInputs)
	for _, g := range tdd.InputGates {
		edge, ok := ex.results[jobgraph.ResultID(g.ResultId)]
		if !ok {
			return failover.NonRecoverable(fmt.Errorf("task %q consumes result %s, unknown to this binary's plan", ti.TaskName, g.ResultId))
		}
		input := -1
		for _, in := range ex.plan.Inputs[vid] {
			if in.Edge == edge {
				input = in.Input
			}
		}
		if input < 0 || input >= spec.NumInputs {
			return failover.NonRecoverable(fmt.Errorf("task %q does not consume result %s", ti.TaskName, g.ResultId))
		}
		inline := g.GetInline()
		if inline == nil {
			return failover.EnvironmentError(fmt.Errorf("task %q: shuffle descriptors of result %s were not resolved (offloaded as %s)", ti.TaskName, g.ResultId, g.GetOffloadedBlobKey()))
		}
		for _, d := range inline.Descriptors {
			addr := d.ProducerDataAddress
			if addr == ex.selfAddr {
				addr = "" // this runner: a local channel
			}
			specs[input] = append(specs[input], network.InputChannelSpec{
				Partition: partitionID(g.ResultId, d.PartitionIndex, d.Producer), Subpartition: int(g.ConsumedSubpartitionIndex), Address: addr})
		}
	}
	var (
		gates []*network.InputGate
		pumps sync.WaitGroup
	)
	defer func() {
		pumps.Wait()
		for _, g := range gates {
			g.Close()
		}
	}()
	pumpCtx, stopPumps := context.WithCancel(ctx)
	defer stopPumps()
	for i, s := range specs {
		g, err := ex.shuffle.CreateInputGate(fmt.Sprintf("%s#%d/input-%d", ti.TaskName, tdd.Attempt.SubtaskIndex, i), s)
		if err != nil {
			return classifyNetwork(err)
		}
		gates = append(gates, g)
		tio.mu.Lock()
		tio.gates = append(tio.gates, g)
		tio.mu.Unlock()
		ng := &netGate{g: g, c: spec.InputCodecs[i], ch: make(chan runtime.ChannelBatch, 2)}
		env.Gates = append(env.Gates, ng)
	}

	for _, ng := range env.Gates {
		ng := ng.(*netGate)
		pumps.Go(func() { ng.pump(pumpCtx, failWith) })
	}
	state(stateRunning)
	err = runtime.RunTask(taskCtx, spec, env)
	if err != nil && taskCtx.Err() != nil && ctx.Err() == nil {
		if cause := context.Cause(taskCtx); cause != nil && !errors.Is(cause, context.Canceled) {
			err = cause
		}
	}
	stopPumps()
	return classifyNetwork(err)
}

// classifyNetwork turns a missing partition (not found at its producer, or
// its producer unreachable) into the failure the JobMaster understands
// (partition-data-missing, naming the partition).
func classifyNetwork(err error) error {
	var pe network.PartitionException
	if errors.As(err, &pe) {
		s := pe.ConsumedPartition()
		return &failover.PartitionNotFoundError{ResultPartitionID: string(s.Partition), Detail: fmt.Sprintf("subpartition %d at %s", s.Subpartition, s.Address), Cause: err}
	}
	return err
}

// Cancel implements runner.Executor.
func (ex *clusterExecutor) Cancel(attempt *pb.ExecutionAttemptID) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if t := ex.tasks[attemptString(attempt)]; t != nil {
		t.canceled = true
		t.cancel(context.Canceled)
	}
}

// TaskMetrics implements runner.MetricsExecutor.
func (ex *clusterExecutor) TaskMetrics() []*pb.TaskIOMetrics {
	ex.mu.Lock()
	tasks := make([]*clusterTask, 0, len(ex.tasks))
	for _, t := range ex.tasks {
		tasks = append(tasks, t)
	}
	ex.mu.Unlock()
	now := time.Now()
	out := make([]*pb.TaskIOMetrics, 0, len(tasks))
	for _, t := range tasks {
		out = append(out, t.io.metrics(now))
	}
	return out
}

// ReleasePartitions implements runner.Executor.
func (ex *clusterExecutor) ReleasePartitions(req *pb.ReleasePartitionsRequest) {
	for _, p := range req.Partitions {
		ex.shuffle.PartitionManager().ReleasePartition(partitionID(p.ResultId, p.PartitionIndex, p.Producer))
	}
}

// Close implements runner.Executor: it cancels every task, waits for them
// and closes the data plane, releasing every partition.
func (ex *clusterExecutor) Close() {
	ex.mu.Lock()
	ex.closed = true
	for _, t := range ex.tasks {
		t.canceled = true
		t.cancel(context.Canceled)
	}
	ex.mu.Unlock()
	ex.wg.Wait()
	ex.shuffle.Close()
}

// Records on the network: a flags byte (bit 0: has a timestamp), the
// timestamp as a zig-zag varint if present, then the value's codec bytes.

func appendRecord(dst []byte, c runtime.Codec, r runtime.Record) ([]byte, error) {
	if r.HasTimestamp {
		dst = append(dst, 1)
		dst = binary.AppendVarint(dst, r.Timestamp)
	} else {
		dst = append(dst, 0)
	}
	return c.Append(dst, r.Value)
}

func decodeRecord(c runtime.Codec, b []byte) (runtime.Record, error) {
	if len(b) == 0 || b[0] > 1 {
		return runtime.Record{}, fmt.Errorf("%w: bad record header", codec.ErrCorrupt)
	}
	var r runtime.Record
	rest := b[1:]
	if b[0] == 1 {
		ts, n := binary.Varint(rest)
		if n <= 0 {
			return runtime.Record{}, fmt.Errorf("%w: bad record timestamp", codec.ErrCorrupt)
		}
		r.Timestamp, r.HasTimestamp = ts, true
		rest = rest[n:]
	}
	v, err := c.Decode(rest)
	if err != nil {
		return runtime.Record{}, err
	}
	r.Value = v
	return r, nil
}

// netWriter is a runtime.ResultWriter into a network result partition.
type netWriter struct {
	p   *network.ResultPartition
	c   runtime.Codec
	buf []byte
}

func (w *netWriter) NumSubpartitions() int { return w.p.NumSubpartitions() }

func (w *netWriter) Emit(s int, ev runtime.Event) error {
	switch ev.Kind {
	case runtime.EventRecord:
		b, err := appendRecord(w.buf[:0], w.c, ev.Record)
		if err != nil {
			return err
		}
		w.buf = b
		return w.p.Emit(s, b)
	case runtime.EventWatermark:
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(ev.Watermark))
		return w.p.EmitEvent(s, network.CustomEvent{EventKind: kindWatermark, Payload: b[:]})
	}
	return nil
}

func (w *netWriter) Flush() error { w.p.Flush(); return nil }

func (w *netWriter) Finish() error { return w.p.Finish() }

// netGate is a runtime.InputGate over a network input gate: a pump
// goroutine decodes records and events into batches.
type netGate struct {
	g  *network.InputGate
	c  runtime.Codec
	ch chan runtime.ChannelBatch
}

func (g *netGate) NumChannels() int                     { return g.g.NumChannels() }
func (g *netGate) Batches() <-chan runtime.ChannelBatch { return g.ch }

// polled is a done context: NextRecord with it returns at once when
// nothing is queued.
var polled = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// pump reads the gate until every channel ended, ctx ends, or it fails
// (then it calls fail). A partial batch is handed on before the pump would
// wait for more data, so records are never held back.
func (g *netGate) pump(ctx context.Context, fail context.CancelCauseFunc) {
	cur := runtime.ChannelBatch{Channel: -1}
	send := func() bool {
		if len(cur.Events) == 0 {
			return true
		}
		select {
		case g.ch <- cur:
			cur = runtime.ChannelBatch{Channel: cur.Channel}
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		roe, err := g.g.NextRecord(polled)
		if err == context.Canceled {
			if !send() {
				return
			}
			roe, err = g.g.NextRecord(ctx)
		}
		if err == io.EOF {
			send()
			return
		}
		if err != nil {
			if ctx.Err() == nil {
				fail(err)
			}
			return
		}
		if roe.Channel != cur.Channel {
			if !send() {
				return
			}
			cur.Channel = roe.Channel
		}
		if roe.Event != nil {
			switch ev := roe.Event.(type) {
			case network.EndOfPartition:
				cur.Events = append(cur.Events, runtime.Event{Kind: runtime.EventEndOfPartition})
			case network.CustomEvent:
				if ev.EventKind == kindWatermark && len(ev.Payload) == 8 {
					cur.Events = append(cur.Events, runtime.Event{Kind: runtime.EventWatermark, Watermark: int64(binary.BigEndian.Uint64(ev.Payload))})
				}
			}
		} else {
			r, err := decodeRecord(g.c, roe.Record)
			if err != nil {
				fail(fmt.Errorf("input channel %d: decoding a %s: %w", roe.Channel, g.c.TypeName(), err))
				return
			}
			cur.Events = append(cur.Events, runtime.Event{Kind: runtime.EventRecord, Record: r})
		}
		if len(cur.Events) >= netBatchSize && !send() {
			return
		}
	}
}
