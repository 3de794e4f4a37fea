package stream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/failure"
	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/storage"
	"github.com/gofl/gofl/stream/checkpointing"
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

// Network events of the SDK's tasks. kindWatermark carries a watermark (8
// bytes, big endian); end of input is the network's EndOfPartition. The
// checkpoint events carry their full payload (see appendBarrier), so the
// options travel with the barrier from the sources to every task.
const (
	kindWatermark = network.FirstCustomKind + iota
	// kindBarrier is a runtime.CheckpointBarrier.
	kindBarrier
	// kindCancelBarrier aborts the alignment of a checkpoint (a barrier
	// payload; only the ID matters).
	kindCancelBarrier
	// kindEndOfData ends a channel's records (one byte: drain).
	kindEndOfData
)

// controlQueue is how many checkpoint triggers and notices may wait for a
// task before more are declined (triggers) or dropped (notices, which the
// next one subsumes).
const controlQueue = 64

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
	// fss opens checkpoint storage for every task's state writes and
	// restores; closed with the executor.
	fss *checkpointing.FileSystems
	// localDir holds the tasks' local state (LSM state backends and
	// downloaded shared files); os.TempDir when empty.
	localDir string
	// localStateDir is the job's task-local state directory on this
	// TaskManager (runner.EnvLocalStateDir); "" without one.
	localStateDir string
	// io spills the batch operators of every task; slotMemory is each
	// slot's managed memory, by subtask index (the tasks of a slot share
	// one index), slotSize bytes each (runner.EnvManagedMemory).
	io         *runtime.IOManager
	slotSize   int64
	slotMemory map[int]*runtime.MemoryManager

	mu sync.Mutex
	// report takes the tasks' checkpoint acknowledgements and declines
	// (runner.CheckpointExecutor); nil until the runner serves.
	report func(*pb.RunnerCheckpointReport)
	closed bool
	tasks  map[string]*clusterTask
	wg     sync.WaitGroup
}

type clusterTask struct {
	cancel   context.CancelCauseFunc
	canceled bool
	io       taskIO
	// control carries checkpoint triggers and notices to the task (nil for
	// a task of a batch job); sent to without blocking under ex.mu while
	// the task is in ex.tasks, read by the task's goroutine.
	control chan runtime.CheckpointControl
	jobID   string
	attempt *pb.ExecutionAttemptID
	// responder is the task's, once it has one: checkpoint notices reach
	// it too (its local state copies follow them).
	responder atomic.Pointer[checkpointing.Responder]
	// gateways link the task's operators with their coordinators in the
	// JobMaster, by operator ID; under ex.mu.
	gateways map[string]*opGateway
}

// taskIO is what a task's I/O metrics are sampled from: its partitions and
// gates, set once they exist.
type taskIO struct {
	attempt *pb.ExecutionAttemptID
	start   time.Time
	// user and watermarks are the task's metric group and watermark
	// gauges, set before it runs.
	user       *taskUserMetrics
	watermarks *runtime.WatermarkGauges
	mu         sync.Mutex
	parts      []*network.ResultPartition
	gates      []*network.InputGate
}

// metrics sums the counters of the task's partitions and gates. Idle time
// is the longest any gate waited for data; busy time is the rest of the
// task's run time that was neither idle nor back-pressured.
func (tio *taskIO) metrics(now time.Time) *pb.TaskIOMetrics {
	m := &pb.TaskIOMetrics{Attempt: tio.attempt, StartTimestampMs: tio.start.UnixMilli(),
		CurrentInputWatermark: tio.watermarks.Input(), CurrentOutputWatermark: tio.watermarks.Output(),
		UserMetrics: tio.user.dump()}
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
	opts, err := storage.OptionsFromEnv()
	if err != nil {
		log.Warn().Err(err).Msg("checkpoint storage options from the environment; using the defaults")
	}
	ex := &clusterExecutor{plan: p, shuffle: shuffle, selfAddr: selfAddr, log: log,
		results: map[jobgraph.ResultID]int{}, tasks: map[string]*clusterTask{}, fss: checkpointing.NewFileSystems(opts),
		localStateDir: os.Getenv(runner.EnvLocalStateDir), slotSize: runtime.DefaultManagedMemory, slotMemory: map[int]*runtime.MemoryManager{}}
	if v, err := strconv.ParseInt(os.Getenv(runner.EnvManagedMemory), 10, 64); err == nil && v > 0 {
		ex.slotSize = v
	}
	var dirs []string
	for _, d := range strings.Split(os.Getenv(runner.EnvTmpDirs), ",") {
		if d = strings.TrimSpace(d); d != "" {
			dirs = append(dirs, d)
		}
	}
	ex.io = runtime.NewIOManager(dirs)
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
	t := &clusterTask{cancel: cancel, io: taskIO{attempt: tdd.Attempt, start: time.Now(),
		user: newTaskUserMetrics(), watermarks: runtime.NewWatermarkGauges()}, jobID: req.JobId, attempt: tdd.Attempt}
	// Every task of a streaming job takes checkpoint messages, so a manual
	// savepoint works with periodic checkpoints off.
	if tdd.GetJobInformation().GetJobType() == pb.JobType_JOB_TYPE_STREAMING {
		t.control = make(chan runtime.CheckpointControl, controlQueue)
	}
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
		err := ex.runTask(ctx, req, vid, spec, t, acc, func(state string) {
			report(&pb.RunnerTaskState{Attempt: tdd.Attempt, State: state})
		})
		if err == nil {
			if cerr := runner.CheckAccumulators(acc); cerr != nil {
				err = failure.NonRecoverable(fmt.Errorf("task %q: %w", ti.TaskName, cerr))
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
			st.State, st.Failure = stateFailed, failure.Encode(err)
			ex.log.Warn().Err(err).Str("attempt", key).Msg("task failed")
		}
		report(st)
	}()
	return nil
}

// runTask sets up the task's partitions and gates, runs its chain and
// tears the gates down; it returns the task's failure.
// Its operators' accumulator results are added to acc.
func (ex *clusterExecutor) runTask(ctx context.Context, req *pb.SubmitTaskRequest, vid jobgraph.VertexID, spec *runtime.TaskSpec, t *clusterTask, acc map[string][]byte, state func(string)) (err error) {
	tdd := req.Tdd
	ti := tdd.TaskInformation
	tio := &t.io
	state(stateInitializing)
	// The task's context fails with a gate's error too; writers blocked on
	// back pressure then stop as well.
	taskCtx, failWith := context.WithCancelCause(ctx)
	defer failWith(nil)
	env := runtime.TaskEnv{SubtaskIndex: int(tdd.Attempt.SubtaskIndex), Parallelism: int(ti.NumberOfSubtasks), MaxParallelism: int(ti.MaxParallelism),
		Accumulate:     func(name string, v []byte) { acc[name] = append(acc[name], v...) },
		OperatorEvents: func(opID string) runtime.OperatorEventGateway { return ex.operatorGateway(t, opID) },
		Metrics:        tio.user, Watermarks: tio.watermarks,
		Batch: runtime.BatchMemory{Memory: ex.slot(int(tdd.Attempt.SubtaskIndex)), IO: ex.io}}
	tlog := ex.log.With().Str("attempt", attemptString(tdd.Attempt)).Logger()
	var local *checkpointing.TaskLocalStateStore
	if t.control != nil && localRecovery(tdd.GetJobInformation().GetConfig()) {
		local = checkpointing.NewTaskLocalStateStore(ex.localStateDir, ti.JobVertexId, int(tdd.Attempt.SubtaskIndex), tlog)
	}
	if t.control != nil {
		resp := checkpointing.NewResponder(checkpointing.ResponderConfig{JobID: req.JobId, Attempt: tdd.Attempt,
			Parallelism: int(ti.NumberOfSubtasks), MaxParallelism: int(ti.MaxParallelism), FileSystems: ex.fss,
			Report: ex.reportCheckpoint, LocalState: local, Log: tlog})
		defer resp.Close() // after the task: writes still in flight decline
		t.responder.Store(resp)
		env.Control, env.Responder = t.control, resp
		env.Checkpointing = checkpointingInterval(tdd.GetJobInformation().GetConfig()) > 0
	}
	env.StateBackend = stateBackendOptions(tdd.GetJobInformation().GetConfig(), ex.localDir, ex.log)
	if tr := tdd.GetTaskRestore(); tr != nil {
		dl, err := ex.restoreDir(tdd.Attempt)
		if err != nil {
			return fmt.Errorf("task %q restoring checkpoint %d: %w", ti.TaskName, tr.CheckpointId, err)
		}
		defer os.RemoveAll(dl) // the backends linked or copied what they use
		restore, st, err := checkpointing.RestoreShared(taskCtx, ex.fss, local, tr, int(tdd.Attempt.SubtaskIndex), int(ti.NumberOfSubtasks), int(ti.MaxParallelism), dl)
		if err != nil {
			return fmt.Errorf("task %q restoring checkpoint %d: %w", ti.TaskName, tr.CheckpointId, err)
		}
		tlog.Info().Int64("checkpoint_id", tr.CheckpointId).Bool("local_recovery", local != nil).
			Int("local_files", st.LocalFiles).Int64("local_bytes", st.LocalBytes).
			Int("remote_files", st.RemoteFiles).Int64("remote_bytes", st.RemoteBytes).Int("local_fallbacks", st.Fallbacks).
			Dur("duration", st.Duration).Msg("restored the task's state")
		env.Restore = restore
	}

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
			return failure.NonRecoverable(fmt.Errorf("the deployment of %q produces no result %s", ti.TaskName, result))
		}
		typ := network.Pipelined
		if rp.PartitionType == pb.ResultPartitionType_RESULT_PARTITION_TYPE_BLOCKING {
			typ = network.Blocking
		}
		p, err := ex.shuffle.CreateResultPartition(taskCtx, partitionID(rp.ResultId, rp.PartitionIndex, tdd.Attempt), typ, int(rp.NumberOfSubpartitions))
		if err != nil {
			return failure.EnvironmentError(err)
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
			return failure.NonRecoverable(fmt.Errorf("task %q consumes result %s, unknown to this binary's plan", ti.TaskName, g.ResultId))
		}
		input := -1
		for _, in := range ex.plan.Inputs[vid] {
			if in.Edge == edge {
				input = in.Input
			}
		}
		if input < 0 || input >= spec.NumInputs {
			return failure.NonRecoverable(fmt.Errorf("task %q does not consume result %s", ti.TaskName, g.ResultId))
		}
		inline := g.GetInline()
		if inline == nil {
			return failure.EnvironmentError(fmt.Errorf("task %q: shuffle descriptors of result %s were not resolved (offloaded as %s)", ti.TaskName, g.ResultId, g.GetOffloadedBlobKey()))
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
		ng := newNetGate(g, spec.InputCodecs[i])
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
	if errors.Is(err, runtime.ErrIncompatibleState) {
		// The restored state can never be read by this binary: restarting
		// would fail the same way.
		return failure.NonRecoverable(err)
	}
	return classifyNetwork(err)
}

// classifyNetwork turns a missing partition (not found at its producer, or
// its producer unreachable) into the failure the JobMaster understands
// (partition-data-missing, naming the partition).
func classifyNetwork(err error) error {
	var pe network.PartitionException
	if errors.As(err, &pe) {
		s := pe.ConsumedPartition()
		return &failure.PartitionNotFoundError{ResultPartitionID: string(s.Partition), Detail: fmt.Sprintf("subpartition %d at %s", s.Subpartition, s.Address), Cause: err}
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

// checkpointingInterval is execution.checkpointing.interval of the job's
// configuration; 0 (off) when unset or unreadable.
func checkpointingInterval(cfg map[string]string) time.Duration {
	v := cfg[conf.CheckpointingInterval.Key()]
	if v == "" {
		return 0
	}
	d, err := conf.ParseDuration(v)
	if err != nil {
		return 0
	}
	return d
}

// localRecovery is state.backend.local-recovery of the job's
// configuration; false when unset or unreadable.
func localRecovery(cfg map[string]string) bool {
	on, err := strconv.ParseBool(cfg[conf.LocalRecovery.Key()])
	return err == nil && on
}

// SetCheckpointReporter implements runner.CheckpointExecutor.
func (ex *clusterExecutor) SetCheckpointReporter(report func(*pb.RunnerCheckpointReport)) {
	ex.mu.Lock()
	ex.report = report
	ex.mu.Unlock()
}

// reportCheckpoint hands a task's acknowledgement or decline to the runner;
// without one (an executor not served) it is dropped.
func (ex *clusterExecutor) reportCheckpoint(r *pb.RunnerCheckpointReport) {
	ex.mu.Lock()
	report := ex.report
	ex.mu.Unlock()
	if report != nil {
		report(r)
	}
}

func (ex *clusterExecutor) declineCheckpoint(jobID string, a *pb.ExecutionAttemptID, id int64, reason string) {
	ex.reportCheckpoint(&pb.RunnerCheckpointReport{Report: &pb.RunnerCheckpointReport_Decline{Decline: &pb.DeclineCheckpointRequest{
		JobId: jobID, Attempt: a, CheckpointId: id, Reason: failure.Encode(fmt.Errorf("checkpoint %d declined: %s", id, reason)),
	}}})
}

// TriggerCheckpoint implements runner.CheckpointExecutor: the trigger is
// queued for the task without blocking; a task that cannot take it has it
// declined.
func (ex *clusterExecutor) TriggerCheckpoint(req *pb.TriggerCheckpointRequest) error {
	key := attemptString(req.Attempt)
	ex.mu.Lock()
	t := ex.tasks[key]
	if t == nil || t.canceled {
		ex.mu.Unlock()
		return fmt.Errorf("%w: %s", runner.ErrTaskNotFound, key)
	}
	queued := false
	if t.control != nil {
		select {
		case t.control <- runtime.CheckpointControl{Kind: runtime.TriggerCheckpoint, Barrier: barrierFromProto(req)}:
			queued = true
		default:
		}
	}
	ex.mu.Unlock()
	switch {
	case t.control == nil:
		ex.declineCheckpoint(req.JobId, req.Attempt, req.CheckpointId, "the task belongs to a batch job, which takes no checkpoints")
	case !queued:
		ex.declineCheckpoint(req.JobId, req.Attempt, req.CheckpointId, fmt.Sprintf("task %s has %d checkpoint messages queued already", key, controlQueue))
	}
	return nil
}

// NotifyCheckpoint implements runner.CheckpointExecutor; a notice that
// finds the task's queue full is dropped (the next one subsumes it). The
// task's Responder learns it too, off the executor's lock (it deletes
// local state copies).
func (ex *clusterExecutor) NotifyCheckpoint(req *pb.NotifyCheckpointRequest) error {
	resp, err := ex.queueNotice(req)
	switch {
	case resp == nil:
	case req.Complete:
		resp.NotifyCheckpointComplete(req.CheckpointId)
	default:
		resp.NotifyCheckpointAborted(req.CheckpointId)
	}
	return err
}

// queueNotice queues a notice for the task and returns its Responder.
func (ex *clusterExecutor) queueNotice(req *pb.NotifyCheckpointRequest) (*checkpointing.Responder, error) {
	key := attemptString(req.Attempt)
	ex.mu.Lock()
	defer ex.mu.Unlock()
	t := ex.tasks[key]
	if t == nil || t.canceled {
		return nil, fmt.Errorf("%w: %s", runner.ErrTaskNotFound, key)
	}
	if t.control == nil {
		return nil, nil
	}
	c := runtime.CheckpointControl{Kind: runtime.NotifyCheckpointAborted, CheckpointID: req.CheckpointId}
	if req.Complete {
		c.Kind = runtime.NotifyCheckpointComplete
	}
	select {
	case t.control <- c:
	default:
		ex.log.Warn().Str("attempt", key).Int64("checkpoint_id", req.CheckpointId).Msg("task's checkpoint queue is full; notice dropped")
	}
	return t.responder.Load(), nil
}

func barrierFromProto(req *pb.TriggerCheckpointRequest) runtime.CheckpointBarrier {
	o := req.GetOptions()
	return runtime.CheckpointBarrier{ID: req.CheckpointId, Timestamp: req.TimestampMs, Options: runtime.CheckpointOptions{
		Type: checkpointTypeFromProto(o.GetType()), ExactlyOnce: o.GetExactlyOnce(), Unaligned: o.GetUnaligned(),
		AlignedTimeout: time.Duration(o.GetAlignedTimeoutMs()) * time.Millisecond, TargetLocation: o.GetTargetLocation(),
	}}
}

func checkpointTypeFromProto(t pb.CheckpointType) runtime.CheckpointType {
	switch t {
	case pb.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT:
		return runtime.Savepoint
	case pb.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT_SUSPEND:
		return runtime.SavepointSuspend
	case pb.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT_TERMINATE:
		return runtime.SavepointTerminate
	}
	return runtime.Checkpoint
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
	if err := ex.fss.Close(); err != nil {
		ex.log.Debug().Err(err).Msg("closing checkpoint storage")
	}
	if err := ex.io.Close(); err != nil {
		ex.log.Warn().Err(err).Msg("removing spill files")
	}
	ex.mu.Lock()
	for _, m := range ex.slotMemory { // no task runs any more
		_ = m.Close()
	}
	ex.mu.Unlock()
}

// slot is the managed memory of the slot the subtask runs in.
func (ex *clusterExecutor) slot(subtask int) *runtime.MemoryManager {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	m := ex.slotMemory[subtask]
	if m == nil {
		m = runtime.NewMemoryManager(ex.slotSize)
		ex.slotMemory[subtask] = m
	}
	return m
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

func decodeRecord(decode func([]byte) (any, error), b []byte) (runtime.Record, error) {
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
	v, err := decode(rest)
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
	case runtime.EventBarrier, runtime.EventCancelBarrier:
		// EmitEvent ships the partial buffer ahead of the event, so a
		// barrier never waits for a flush.
		kind := kindBarrier
		if ev.Kind == runtime.EventCancelBarrier {
			kind = kindCancelBarrier
		}
		return w.p.EmitEvent(s, network.CustomEvent{EventKind: kind, Payload: appendBarrier(nil, ev.Barrier)})
	case runtime.EventEndOfData:
		var drain byte
		if ev.Drain {
			drain = 1
		}
		return w.p.EmitEvent(s, network.CustomEvent{EventKind: kindEndOfData, Payload: []byte{drain}})
	}
	return nil
}

// appendBarrier encodes a barrier: ID and timestamp (8 bytes each, big
// endian), the checkpoint type, a flags byte (bit 0 exactly-once, bit 1
// unaligned), the aligned timeout in ms (uvarint) and the target location
// (uvarint length, bytes).
func appendBarrier(b []byte, cb runtime.CheckpointBarrier) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(cb.ID))
	b = binary.BigEndian.AppendUint64(b, uint64(cb.Timestamp))
	b = append(b, byte(cb.Options.Type))
	var flags byte
	if cb.Options.ExactlyOnce {
		flags |= 1
	}
	if cb.Options.Unaligned {
		flags |= 2
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, uint64(cb.Options.AlignedTimeout.Milliseconds()))
	b = binary.AppendUvarint(b, uint64(len(cb.Options.TargetLocation)))
	return append(b, cb.Options.TargetLocation...)
}

// decodeBarrier parses what appendBarrier wrote.
func decodeBarrier(p []byte) (runtime.CheckpointBarrier, error) {
	bad := func(what string) (runtime.CheckpointBarrier, error) {
		return runtime.CheckpointBarrier{}, fmt.Errorf("%w: checkpoint barrier: bad %s", codec.ErrCorrupt, what)
	}
	if len(p) < 18 {
		return bad("length")
	}
	cb := runtime.CheckpointBarrier{ID: int64(binary.BigEndian.Uint64(p)), Timestamp: int64(binary.BigEndian.Uint64(p[8:]))}
	typ, flags := runtime.CheckpointType(p[16]), p[17]
	if typ < runtime.Checkpoint || typ > runtime.SavepointTerminate {
		return bad("checkpoint type")
	}
	cb.Options.Type, cb.Options.ExactlyOnce, cb.Options.Unaligned = typ, flags&1 != 0, flags&2 != 0
	p = p[18:]
	ms, n := binary.Uvarint(p)
	if n <= 0 {
		return bad("aligned timeout")
	}
	cb.Options.AlignedTimeout = time.Duration(ms) * time.Millisecond
	p = p[n:]
	l, n := binary.Uvarint(p)
	if n <= 0 || l != uint64(len(p)-n) {
		return bad("target location")
	}
	cb.Options.TargetLocation = string(p[n:])
	return cb, nil
}

// EmitPriority implements runtime.PriorityWriter: the barrier overtakes
// the subpartition's queued buffers, whose records and events it returns.
func (w *netWriter) EmitPriority(s int, ev runtime.Event) ([]runtime.Event, error) {
	if ev.Kind != runtime.EventBarrier {
		return nil, fmt.Errorf("priority event of kind %d", ev.Kind)
	}
	if w.p.Type() != network.Pipelined {
		ev.Priority = false
		return nil, w.Emit(s, ev)
	}
	over, err := w.p.EmitPriorityEvent(s, network.CustomEvent{EventKind: kindBarrier, Payload: appendBarrier(nil, ev.Barrier)})
	if err != nil {
		return nil, err
	}
	// Records may span buffers (the overtaken ones start and end at record
	// boundaries): parse the data buffers as one stream.
	var out []runtime.Event
	var pending []byte
	records := func() error {
		d := pending
		for len(d) > 0 {
			if len(d) < 4 {
				break
			}
			l := int(binary.BigEndian.Uint32(d))
			if l > len(d)-4 {
				break
			}
			r, err := decodeRecord(w.c.Decode, d[4:4+l])
			if err != nil {
				return err
			}
			out = append(out, runtime.Event{Kind: runtime.EventRecord, Record: r})
			d = d[4+l:]
		}
		pending = append(pending[:0], d...)
		return nil
	}
	for _, b := range over {
		if b.IsEvent {
			if len(pending) > 0 {
				return nil, fmt.Errorf("%w: event inside a record in an overtaken buffer", codec.ErrCorrupt)
			}
			nev, err := network.DecodeEvent(b.Data)
			if err != nil {
				return nil, err
			}
			if cev, ok := nev.(network.CustomEvent); ok {
				rev, err := decodeEvent(cev)
				if err != nil {
					return nil, err
				}
				out = append(out, rev)
			}
			continue
		}
		pending = append(pending, b.Data...)
		if err := records(); err != nil {
			return nil, err
		}
	}
	if len(pending) > 0 {
		return nil, fmt.Errorf("%w: overtaken buffers end inside a record", codec.ErrCorrupt)
	}
	return out, nil
}

func (w *netWriter) Flush() error { w.p.Flush(); return nil }

// Available implements runtime.AvailabilityWriter.
func (w *netWriter) Available() <-chan struct{} { return w.p.Available() }

func (w *netWriter) Finish() error { return w.p.Finish() }

// netGate is a runtime.InputGate over a network input gate: a pump
// goroutine decodes records and events into batches.
type netGate struct {
	g  *network.InputGate
	c  runtime.Codec
	ch chan runtime.ChannelBatch
	// prio carries priority barriers (runtime.PriorityInputGate), which the
	// pump forwards even while blocked handing on a batch.
	prio chan runtime.ChannelBatch
	// free holds batches the task is done with (Recycle), which the pump
	// fills again.
	free chan []runtime.Event
}

// netFreeBatches is how many recycled batches a gate keeps: as many as
// can be in flight (ch's capacity, the one being filled, the one being
// processed).
const netFreeBatches = 4

// newNetGate returns the gate of g, whose records c decodes.
func newNetGate(g *network.InputGate, c runtime.Codec) *netGate {
	return &netGate{g: g, c: c, ch: make(chan runtime.ChannelBatch, 2),
		prio: make(chan runtime.ChannelBatch, netPriorityQueue), free: make(chan []runtime.Event, netFreeBatches)}
}

// Recycle implements runtime.RecyclingInputGate. The events are cleared
// first, so a kept batch holds no record values alive.
func (g *netGate) Recycle(evs []runtime.Event) {
	if cap(evs) < netBatchSize {
		return // a trickle's small batch: the pump makes full ones
	}
	clear(evs) // beyond len, a free batch is already zero
	select {
	case g.free <- evs[:0]:
	default:
	}
}

// batch is an empty batch to fill: a recycled one, or a new one of n
// events.
func (g *netGate) batch(n int) []runtime.Event {
	select {
	case evs := <-g.free:
		return evs
	default:
		return make([]runtime.Event, 0, n)
	}
}

// netPriorityQueue is how many priority barriers wait for the task.
const netPriorityQueue = 16

func (g *netGate) NumChannels() int                      { return g.g.NumChannels() }
func (g *netGate) Batches() <-chan runtime.ChannelBatch  { return g.ch }
func (g *netGate) Priority() <-chan runtime.ChannelBatch { return g.prio }

// sendPriority hands a priority event to the task.
func (g *netGate) sendPriority(ctx context.Context, roe network.RecordOrEvent) error {
	ev, ok := roe.Event.(network.CustomEvent)
	if !ok {
		return fmt.Errorf("input channel %d: priority event of kind %d", roe.Channel, roe.Event.Kind())
	}
	rev, err := decodeEvent(ev)
	if err != nil {
		return fmt.Errorf("input channel %d: %w", roe.Channel, err)
	}
	rev.Priority = true
	select {
	case g.prio <- runtime.ChannelBatch{Channel: roe.Channel, Events: []runtime.Event{rev}}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// forwardPriority hands on every priority event the gate holds.
func (g *netGate) forwardPriority(ctx context.Context) error {
	for {
		boe, ok, err := g.g.PollPriority()
		if err != nil || !ok {
			return err
		}
		if err := g.sendPriority(ctx, network.RecordOrEvent{Event: boe.Event, Channel: boe.Channel, Priority: true}); err != nil {
			return err
		}
	}
}

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
	decode := decoderFor(g.c) // this goroutine's
	// A batch is one the task recycled, or a new one of the size of the
	// last: growing it by append costs a run of allocations and copies per
	// batch, and a trickle of records should not allocate full batches.
	cur := runtime.ChannelBatch{Channel: -1, Events: g.batch(netBatchSize)}
	send := func() bool {
		if len(cur.Events) == 0 {
			return true
		}
		for {
			select {
			case g.ch <- cur:
				cur = runtime.ChannelBatch{Channel: cur.Channel, Events: g.batch(max(8, len(cur.Events)))}
				return true
			case <-g.g.PriorityAvailable():
				// A priority barrier overtakes the batch waiting here.
				if err := g.forwardPriority(ctx); err != nil {
					if ctx.Err() == nil {
						fail(err)
					}
					return false
				}
			case <-ctx.Done():
				return false
			}
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
		if roe.Priority {
			if err := g.sendPriority(ctx, roe); err != nil {
				if ctx.Err() == nil {
					fail(err)
				}
				return
			}
			continue
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
				rev, err := decodeEvent(ev)
				if err != nil {
					fail(fmt.Errorf("input channel %d: %w", roe.Channel, err))
					return
				}
				if roe.Position && rev.Kind == runtime.EventBarrier {
					rev.Kind = runtime.EventBarrierPosition
				}
				cur.Events = append(cur.Events, rev)
			}
		} else {
			r, err := decodeRecord(decode, roe.Record)
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

// decodeEvent turns a network event of the SDK's into the task's event.
func decodeEvent(ev network.CustomEvent) (runtime.Event, error) {
	switch ev.EventKind {
	case kindWatermark:
		if len(ev.Payload) == 8 {
			return runtime.Event{Kind: runtime.EventWatermark, Watermark: int64(binary.BigEndian.Uint64(ev.Payload))}, nil
		}
	case kindBarrier, kindCancelBarrier:
		b, err := decodeBarrier(ev.Payload)
		if err != nil {
			return runtime.Event{}, err
		}
		kind := runtime.EventBarrier
		if ev.EventKind == kindCancelBarrier {
			kind = runtime.EventCancelBarrier
		}
		return runtime.Event{Kind: kind, Barrier: b}, nil
	case kindEndOfData:
		if len(ev.Payload) == 1 && ev.Payload[0] <= 1 {
			return runtime.Event{Kind: runtime.EventEndOfData, Drain: ev.Payload[0] == 1}, nil
		}
	default:
		return runtime.Event{}, fmt.Errorf("%w: unknown network event kind %d", codec.ErrCorrupt, ev.EventKind)
	}
	return runtime.Event{}, fmt.Errorf("%w: network event kind %d with a %d-byte payload", codec.ErrCorrupt, ev.EventKind, len(ev.Payload))
}
