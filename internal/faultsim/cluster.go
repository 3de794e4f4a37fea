package faultsim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/jobgraph"
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/jobmanager/failover"
	"github.com/gofl/gofl/jobmanager/jobmaster"
	"github.com/gofl/gofl/jobmanager/scheduler"
	"github.com/gofl/gofl/resourcemanager"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/taskmanager"
)

// ClusterConfig is one simulated cluster and job run.
type ClusterConfig struct {
	Seed         uint64
	TaskManagers int // started at the beginning
	Slots        int // per TaskManager
	Job          *jobgraph.JobGraph
	Scheduler    scheduler.Config
	Faults       Faults
	// Crashes is how many times a random TaskManager is killed while the
	// job runs; a killed TaskManager comes back after RestartAfter.
	Crashes      int
	RestartAfter time.Duration
	// Partitions is how many times a random TaskManager is cut off from the
	// JobManager for a while (up to twice the heartbeat timeout).
	Partitions int
	// LoseRMMessages drops JobMaster↔ResourceManager calls as the network
	// drops messages.
	LoseRMMessages bool
	// TaskDuration bounds how long a simulated task runs.
	MinTask, MaxTask                    time.Duration
	HeartbeatInterval, HeartbeatTimeout time.Duration
	RPCTimeout                          time.Duration
	// CancelAt, if not zero, cancels the job then (the job may also have
	// finished before): it must end CANCELED or FINISHED.
	CancelAt time.Duration
	// Limit is the simulated time after which the run counts as hung.
	Limit time.Duration
	Log   zerolog.Logger
}

// Result of one run.
type Result struct {
	Seed       uint64
	Status     scheduler.JobStatus
	Steps      int
	Simulated  time.Duration
	Violations []string
	Trace      []string
}

func (c *ClusterConfig) defaults() {
	if c.TaskManagers <= 0 {
		c.TaskManagers = 3
	}
	if c.Slots <= 0 {
		c.Slots = 2
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = time.Second
	}
	if c.HeartbeatTimeout <= 0 {
		c.HeartbeatTimeout = 5 * time.Second
	}
	if c.RPCTimeout <= 0 {
		c.RPCTimeout = time.Second
	}
	if c.MaxTask <= 0 {
		c.MinTask, c.MaxTask = 100*time.Millisecond, 3*time.Second
	}
	if c.RestartAfter <= 0 {
		c.RestartAfter = 2 * time.Second
	}
	if c.Limit <= 0 {
		c.Limit = 30 * time.Minute
	}
	if c.Faults.MaxLatency <= 0 {
		c.Faults.MinLatency, c.Faults.MaxLatency = 100*time.Microsecond, 20*time.Millisecond
	}
}

const jobManagerAddress = "jobmanager:6123"

type cluster struct {
	cfg    ClusterConfig
	s      *Sim
	jmNode *Node
	rm     *resourcemanager.ResourceManager
	jm     *jobmaster.JobMaster
	tms    []*simTM
	// running: every attempt a live TaskManager runs, by subtask.
	running map[string]map[string]string // subtask → attempt → TaskManager
	// partitions finished producers left, by ResultPartitionID: the
	// TaskManager node incarnation holding them.
	partitions map[string]string
	lost       map[string]bool // partitions that died with their holder
	violations []string
	finished   map[string]string // subtask → attempt that finished
}

type simTM struct {
	id    string
	node  *Node
	te    *taskmanager.TaskExecutor
	tasks map[string]*simTask // by attempt
}

// RunCluster runs cfg.Job on a simulated JobManager (ResourceManager and
// JobMaster) and TaskManagers with faults, and checks the invariants.
func RunCluster(cfg ClusterConfig) Result {
	cfg.defaults()
	s := New(cfg.Seed, cfg.Faults, cfg.RPCTimeout)
	// Logs tell simulated time.
	cfg.Log = cfg.Log.Hook(zerolog.HookFunc(func(e *zerolog.Event, _ zerolog.Level, _ string) {
		e.Str("sim", s.Clock.Now().Format("15:04:05.000"))
	}))
	c := &cluster{cfg: cfg, s: s, running: map[string]map[string]string{}, partitions: map[string]string{}, lost: map[string]bool{}, finished: map[string]string{}}
	start := s.Clock.Now()
	c.jmNode = s.AddNode("jobmanager")
	c.rm = resourcemanager.New(resourcemanager.Config{
		HeartbeatInterval: cfg.HeartbeatInterval, HeartbeatTimeout: cfg.HeartbeatTimeout, RPCTimeout: cfg.RPCTimeout,
		Clock: s.Clock, Executor: c.jmNode.Executor(), Rand: s.Rand,
		DialTaskExecutor: func(addr string) (pb.TaskExecutorServiceClient, io.Closer, error) {
			return pb.NewTaskExecutorServiceClient(s.Conn(c.jmNode, addr)), nopCloser{}, nil
		},
	}, cfg.Log.With().Str("component", "rm").Logger())
	c.rm.Start()
	s.Serve(c.jmNode, jobManagerAddress, &pb.ResourceManagerService_ServiceDesc, c.rm.Service())
	sched := cfg.Scheduler
	sched.StrictTransitions = true
	jm, err := jobmaster.New(jobmaster.Config{
		Scheduler: sched, HeartbeatInterval: cfg.HeartbeatInterval, HeartbeatTimeout: cfg.HeartbeatTimeout,
		RPCTimeout: cfg.RPCTimeout, RPCFailureThreshold: 2, Address: jobManagerAddress,
		Clock: s.Clock, Executor: c.jmNode.Executor(), Rand: s.Rand,
		DialTaskManager: func(addr string) (pb.TaskExecutorServiceClient, io.Closer, error) {
			return pb.NewTaskExecutorServiceClient(s.Conn(c.jmNode, addr)), nopCloser{}, nil
		},
	}, cfg.Job, c.resourceManager(), cfg.Log.With().Str("component", "jm").Logger())
	if err != nil {
		return Result{Seed: cfg.Seed, Violations: []string{"job master: " + err.Error()}}
	}
	c.jm = jm
	s.Serve(c.jmNode, jobManagerAddress, &pb.JobMasterService_ServiceDesc, jobMasterService{jm: jm})
	for i := range cfg.TaskManagers {
		c.startTM(fmt.Sprintf("tm-%d", i))
	}
	jm.Start()
	c.injectFaults()
	cancelled := false
	if cfg.CancelAt > 0 {
		s.Clock.AfterFunc(cfg.CancelAt, func() {
			if st, err := jm.Status(context.Background()); err == nil && !st.IsGloballyTerminal() {
				cancelled = true
				s.tracef("cancel the job")
				if err := jm.Cancel(context.Background()); err != nil {
					c.violate("cancelling the job: %v", err)
				}
			}
		})
	}

	ended := func() bool {
		select {
		case <-jm.Done():
			return true
		default:
			return false
		}
	}
	if !s.RunUntil(start.Add(cfg.Limit), ended) {
		c.violate("job did not end within %v of simulated time (status %s)", cfg.Limit, c.status())
	}
	res := Result{Seed: cfg.Seed, Status: jm.Result().Status}
	want := scheduler.JobFinished
	if cancelled {
		want = scheduler.JobCanceled
	}
	if ended() && res.Status != want {
		c.violate("job ended %s, want %s: %v", res.Status, want, jm.Result().Cause)
	}
	// Quiesce: heal everything, bring crashed TaskManagers back and let
	// heartbeats and reconciliation converge.
	s.HealAll()
	for _, tm := range c.tms {
		if !tm.node.Alive() {
			c.restartTM(tm)
		}
	}
	s.RunUntil(s.Clock.Now().Add(3*cfg.HeartbeatTimeout+cfg.RPCTimeout), func() bool { return false })
	c.checkQuiescent()
	res.Steps, res.Simulated, res.Violations, res.Trace = s.Steps(), s.Clock.Now().Sub(start), c.violations, s.Trace()
	return res
}

func (c *cluster) status() string {
	select {
	case <-c.jm.Done():
		return c.jm.Result().Status.String()
	default:
		return "running"
	}
}

func (c *cluster) violate(format string, args ...any) {
	c.violations = append(c.violations, fmt.Sprintf("%s: ", c.s.Clock.Now().Format("15:04:05.000"))+fmt.Sprintf(format, args...))
}

func (c *cluster) startTM(id string) {
	node := c.s.AddNode(id)
	tm := &simTM{id: id, node: node}
	c.tms = append(c.tms, tm)
	c.bootTM(tm)
}

func (c *cluster) restartTM(tm *simTM) {
	tm.node.Restart()
	c.bootTM(tm)
}

func (c *cluster) bootTM(tm *simTM) {
	s, node := c.s, tm.node
	tm.tasks = map[string]*simTask{}
	te, err := taskmanager.New(taskmanager.Config{
		ResourceID: tm.id, Host: tm.id, RPCBindAddress: tm.id + ":1", NumberOfSlots: c.cfg.Slots,
		ResourceManagerAddress: jobManagerAddress, RPCTimeout: c.cfg.RPCTimeout,
		HeartbeatInterval: c.cfg.HeartbeatInterval, HeartbeatTimeout: c.cfg.HeartbeatTimeout,
		Clock: s.Clock, Executor: node.Executor(), Rand: s.Rand, NoRPCServer: true,
		DialJobMaster: func(addr string) (pb.JobMasterServiceClient, io.Closer, error) {
			return pb.NewJobMasterServiceClient(s.Conn(node, addr)), nopCloser{}, nil
		},
		DialResourceManager: func(addr string) (pb.ResourceManagerServiceClient, io.Closer, error) {
			return pb.NewResourceManagerServiceClient(s.Conn(node, addr)), nopCloser{}, nil
		},
		TaskRunner: func(taskmanager.TaskRunnerHost) taskmanager.TaskRunner {
			return &simRunner{c: c, tm: tm, inc: node.Incarnation}
		},
	}, c.cfg.Log.With().Str("component", tm.id).Logger())
	if err != nil {
		c.violate("TaskManager %s: %v", tm.id, err)
		return
	}
	tm.te = te
	s.Serve(node, tm.id+":1", &pb.TaskExecutorService_ServiceDesc, te.Service())
	if err := te.Start(); err != nil {
		c.violate("TaskManager %s start: %v", tm.id, err)
	}
}

// crash kills a TaskManager process: its tasks and partitions are gone.
func (c *cluster) crash(tm *simTM) {
	tm.node.Crash()
	for _, t := range tm.tasks {
		c.taskGone(t)
	}
	tm.tasks = map[string]*simTask{}
	prefix := tm.id + "#"
	for p, holder := range c.partitions {
		if strings.HasPrefix(holder, prefix) {
			delete(c.partitions, p)
			c.lost[p] = true
		}
	}
}

func (c *cluster) injectFaults() {
	s, cfg := c.s, c.cfg
	horizon := int64(20 * time.Second)
	for range cfg.Crashes {
		at := time.Duration(s.Rand.Int64N(horizon))
		tm := c.tms[s.Rand.IntN(len(c.tms))]
		s.Clock.AfterFunc(at, func() {
			if !tm.node.Alive() || s.Calm() {
				return
			}
			c.crash(tm)
			s.Clock.AfterFunc(cfg.RestartAfter, func() { c.restartTM(tm) })
		})
	}
	for range cfg.Partitions {
		at := time.Duration(s.Rand.Int64N(horizon))
		length := time.Duration(s.Rand.Int64N(int64(2 * cfg.HeartbeatTimeout)))
		tm := c.tms[s.Rand.IntN(len(c.tms))]
		s.Clock.AfterFunc(at, func() {
			s.Partition(c.jmNode.Name, tm.id, true)
			s.Clock.AfterFunc(length, func() { s.Partition(c.jmNode.Name, tm.id, false) })
		})
	}
}

// checkQuiescent: after the job ended and the cluster settled, nothing
// runs, no slot is held, and the ResourceManager agrees with the
// TaskManagers.
func (c *cluster) checkQuiescent() {
	ctx := context.Background()
	rmView := map[string]int{} // free slots per TaskManager as the RM sees them
	if infos, err := c.rm.TaskManagers(ctx); err == nil {
		for _, i := range infos {
			rmView[i.ID] = i.FreeSlots
		}
	} else {
		c.violate("ResourceManager: %v", err)
	}
	for _, tm := range c.tms {
		if len(tm.tasks) > 0 {
			var as []string
			for a := range tm.tasks {
				as = append(as, a)
			}
			sort.Strings(as)
			c.violate("%s still runs %v after the job ended", tm.id, as)
		}
		snap, err := tm.te.Snapshot(ctx)
		if err != nil {
			c.violate("%s snapshot: %v", tm.id, err)
			continue
		}
		free := 0
		for _, sl := range snap.Slots {
			if sl.AllocationID == "" {
				free++
			} else {
				c.violate("%s slot %d still allocated to %s (job %s) after the job ended", tm.id, sl.Index, sl.AllocationID, sl.JobID)
			}
		}
		if got, ok := rmView[tm.id]; !ok {
			c.violate("%s is not registered at the ResourceManager after the cluster settled", tm.id)
		} else if got != free {
			c.violate("ResourceManager sees %d free slots on %s, the TaskManager has %d", got, tm.id, free)
		}
	}
}

// ---- simulated tasks ----

func subtaskKey(a *pb.ExecutionAttemptID) string {
	return fmt.Sprintf("%s/%d", a.JobVertexId, a.SubtaskIndex)
}

func attemptKey(a *pb.ExecutionAttemptID) string {
	return fmt.Sprintf("%s/%d/%d", a.JobVertexId, a.SubtaskIndex, a.AttemptNumber)
}

type simRunner struct {
	c   *cluster
	tm  *simTM
	inc int
}

type simTask struct {
	r       *simRunner
	req     *pb.SubmitTaskRequest
	tc      taskmanager.TaskContext
	timer   interface{ Stop() bool }
	ended   bool
	attempt string
	subtask string
}

func (r *simRunner) DataAddress(jobID string) (string, error)       { return r.tm.id + ":data", nil }
func (r *simRunner) ReleasePartitions(*pb.ReleasePartitionsRequest) {}
func (r *simRunner) ReleaseJob(string)                              {}
func (r *simRunner) Close()                                         {}

func (r *simRunner) alive() bool { return r.tm.node.Alive() && r.tm.node.Incarnation == r.inc }

func (r *simRunner) StartTask(req *pb.SubmitTaskRequest, tc taskmanager.TaskContext) taskmanager.RunningTask {
	c, s := r.c, r.c.s
	a := req.Tdd.Attempt
	t := &simTask{r: r, req: req, tc: tc, attempt: attemptKey(a), subtask: subtaskKey(a)}
	if others := c.running[t.subtask]; len(others) > 0 {
		for other, where := range others {
			c.violate("attempt %s starts on %s while attempt %s of the same subtask runs on %s", t.attempt, r.tm.id, other, where)
		}
	}
	if c.running[t.subtask] == nil {
		c.running[t.subtask] = map[string]string{}
	}
	c.running[t.subtask][t.attempt] = r.tm.id
	r.tm.tasks[t.attempt] = t
	d := c.cfg.MinTask + time.Duration(s.Rand.Int64N(int64(c.cfg.MaxTask-c.cfg.MinTask)+1))
	s.Clock.AfterFunc(0, func() {
		if !r.alive() || t.ended {
			return
		}
		tc.State("INITIALIZING")
		t.awaitInputs(s.Clock.Now().Add(partitionRequestTimeout), func() {
			tc.State("RUNNING")
			t.timer = s.Clock.AfterFunc(d, func() {
				if r.alive() && !t.ended {
					t.end(nil)
				}
			})
		})
	})
	return t
}

// partitionRequestTimeout is how long a reader keeps asking for a
// partition its producer has not produced yet (the data plane's
// partition-request backoff, taskmanager/network).
const partitionRequestTimeout = 10 * time.Second

// awaitInputs runs then once every BLOCKING input partition exists. A
// partition whose holder crashed, or that is still missing at deadline,
// fails the task as a reader finds it missing on the producer's side.
func (t *simTask) awaitInputs(deadline time.Time, then func()) {
	r, s := t.r, t.r.c.s
	if !r.alive() || t.ended {
		return
	}
	var missing string
	for _, g := range t.req.Tdd.InputGates {
		if g.PartitionType != pb.ResultPartitionType_RESULT_PARTITION_TYPE_BLOCKING {
			continue
		}
		for _, d := range g.GetInline().GetDescriptors() {
			id := eg.ResultPartitionID{Result: jobgraph.ResultID(g.ResultId), Partition: d.PartitionIndex, Producer: attemptID(d.Producer)}.String()
			if _, ok := r.c.partitions[id]; !ok && missing == "" {
				missing = id
				if r.c.lost[id] || !s.Clock.Now().Before(deadline) {
					t.end(&failover.PartitionNotFoundError{ResultPartitionID: id, Detail: "on " + d.ProducerTaskManagerId})
					return
				}
			}
		}
	}
	if missing == "" {
		then()
		return
	}
	s.Clock.AfterFunc(100*time.Millisecond, func() { t.awaitInputs(deadline, then) })
}

func attemptID(p *pb.ExecutionAttemptID) eg.ExecutionAttemptID {
	return eg.ExecutionAttemptID{Graph: p.GetGraph(), JobVertex: jobgraph.VertexID(p.GetJobVertexId()), Subtask: p.GetSubtaskIndex(), Attempt: p.GetAttemptNumber()}
}

func (t *simTask) end(err error) {
	if t.ended {
		return
	}
	c := t.r.c
	c.taskGone(t)
	delete(t.r.tm.tasks, t.attempt)
	if err == nil {
		for _, p := range t.req.Tdd.ProducedPartitions {
			id := eg.ResultPartitionID{Result: jobgraph.ResultID(p.ResultId), Partition: p.PartitionIndex, Producer: attemptID(t.req.Tdd.Attempt)}.String()
			c.partitions[id] = fmt.Sprintf("%s#%d", t.r.tm.id, t.r.inc)
		}
	}
	t.tc.Ended(taskmanager.TaskResult{Err: err})
}

func (c *cluster) taskGone(t *simTask) {
	t.ended = true
	if t.timer != nil {
		t.timer.Stop()
	}
	delete(c.running[t.subtask], t.attempt)
}

func (t *simTask) Cancel() {
	if t.ended {
		return
	}
	r := t.r
	r.c.s.Clock.AfterFunc(0, func() {
		if r.alive() && !t.ended {
			t.end(nil)
		}
	})
}

func (t *simTask) Metrics() *pb.TaskIOMetrics { return nil }

// ---- the JobManager process's wiring ----

// jobMasterService routes TaskManagers' calls to the one JobMaster, as the
// Dispatcher's router does.
type jobMasterService struct {
	pb.UnimplementedJobMasterServiceServer
	jm *jobmaster.JobMaster
}

func (j jobMasterService) RegisterTaskManager(ctx context.Context, r *pb.RegisterTaskManagerRequest) (*pb.RegisterTaskManagerResponse, error) {
	return j.jm.RegisterTaskManager(ctx, r)
}
func (j jobMasterService) OfferSlots(ctx context.Context, r *pb.OfferSlotsRequest) (*pb.OfferSlotsResponse, error) {
	return j.jm.OfferSlots(ctx, r)
}
func (j jobMasterService) UpdateTaskExecutionState(ctx context.Context, r *pb.UpdateTaskExecutionStateRequest) (*pb.Ack, error) {
	return j.jm.UpdateTaskExecutionState(ctx, r)
}
func (j jobMasterService) DisconnectTaskManager(ctx context.Context, r *pb.DisconnectTaskManagerRequest) (*pb.Ack, error) {
	return j.jm.DisconnectTaskManager(ctx, r)
}
func (j jobMasterService) GetBlob(ctx context.Context, r *pb.GetBlobRequest) (*pb.GetBlobResponse, error) {
	return j.jm.GetBlob(ctx, r)
}
func (j jobMasterService) ReportPartitionsLost(ctx context.Context, r *pb.ReportPartitionsLostRequest) (*pb.Ack, error) {
	return j.jm.ReportPartitionsLost(ctx, r)
}

// resourceManager is the JobMaster's in-process view of the
// ResourceManager; with LoseRMMessages its calls are lost as network
// messages are.
func (c *cluster) resourceManager() jobmaster.ResourceManager {
	if !c.cfg.LoseRMMessages {
		return c.rm
	}
	return lossyRM{c}
}

type lossyRM struct{ c *cluster }

var errLost = errors.New("faultsim: message lost")

func (l lossyRM) lose(what string) bool {
	s := l.c.s
	if s.net.Drop > 0 && s.Rand.Float64() < s.net.Drop/2 {
		s.replyDelay = s.callTimeout
		s.tracef("drop %s jobmaster->resourcemanager", what)
		return true
	}
	return false
}

func (l lossyRM) RegisterJobMaster(ctx context.Context, jobID, address string, gw resourcemanager.JobMasterGateway) error {
	if l.lose("RegisterJobMaster") {
		return fmt.Errorf("%w: %w", errLost, context.DeadlineExceeded)
	}
	return l.c.rm.RegisterJobMaster(ctx, jobID, address, gw)
}

func (l lossyRM) DeclareResourceRequirements(ctx context.Context, jobID string, slots int) error {
	if l.lose("DeclareResourceRequirements") {
		return fmt.Errorf("%w: %w", errLost, context.DeadlineExceeded)
	}
	err := l.c.rm.DeclareResourceRequirements(ctx, jobID, slots)
	if err == nil && l.lose("DeclareResourceRequirements reply") {
		return fmt.Errorf("%w: %w", errLost, context.DeadlineExceeded)
	}
	return err
}

func (l lossyRM) DisconnectJobMaster(ctx context.Context, jobID string, cause error) error {
	if l.lose("DisconnectJobMaster") {
		return fmt.Errorf("%w: %w", errLost, context.DeadlineExceeded)
	}
	return l.c.rm.DisconnectJobMaster(ctx, jobID, cause)
}
