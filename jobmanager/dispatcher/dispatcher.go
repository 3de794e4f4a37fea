package dispatcher

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/internal/ids"
	"github.com/gofl/gofl/internal/mailbox"
	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/jobmanager/checkpoint"
	"github.com/gofl/gofl/jobmanager/jobmaster"
	"github.com/gofl/gofl/jobmanager/scheduler"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/rpc/restapi"
	"github.com/gofl/gofl/storage"
)

// ResourceManager is what the Dispatcher and its JobMasters need from the
// ResourceManager.
type ResourceManager interface {
	jobmaster.ResourceManager
	TaskManagers(ctx context.Context) ([]restapi.TaskManagerInfo, error)
	TaskManager(ctx context.Context, id string) (restapi.TaskManagerInfo, error)
	Overview(ctx context.Context) (taskManagers, slotsTotal, slotsFree int, err error)
}

// Config of the Dispatcher.
type Config struct {
	// Cluster is the JobManager's configuration; a job's JobGraph config
	// may override the scheduling and restart options for that job.
	Cluster *conf.Configuration
	// Address is the JobManager's RPC address handed to TaskManagers.
	Address string
	// MaxArchivedJobs bounds the history of ended jobs (default 1000).
	MaxArchivedJobs int
	// ResultCacheBytes bounds the accumulator results the history keeps
	// (jobstore.cache-size): past it, the oldest ended jobs' results are
	// dropped, and asking for one fails with restapi.ErrResultGone. The
	// newest job's result is always kept. 0 means 50 MiB.
	ResultCacheBytes int64
	Version          string
	// JobMasterOptions, if set, adjusts each JobMaster's configuration
	// before it is built (a test or the fault simulator injects its clock,
	// executor, dialer and randomness).
	JobMasterOptions func(*jobmaster.Config)
	// HA, when set, makes this the Dispatcher of an elected leader
	// (high-availability.type other than none); see RecoverJobs.
	HA *HA
	// OnGloballyTerminal, if set, is called once per job that ended
	// globally terminal (FINISHED, FAILED, CANCELED), off the mailbox once
	// the job's final views are queryable; WaitJob returns only after it
	// did. It may query the Dispatcher; it must not block for long (the
	// history server's archiving: jobmanager.archive.fs.dir).
	OnGloballyTerminal func(jobID string)
	// PrepareJob, if set, is called by SubmitJob (not for recovered jobs),
	// with the job ID set, before the job is validated and stored: it may
	// rewrite the job's configuration (a session JobManager stages the
	// job's delegation tokens and names the staged file there). An error
	// fails the submission. restapi.JobConfigDelegationTokens is removed
	// after it, whatever it did.
	PrepareJob func(ctx context.Context, jg *jobgraph.JobGraph) error
	// WhileRunning, if set, runs in a goroutine of its own beside each
	// job's JobMaster (submitted or recovered) and must return once ctx
	// ends, which it does when the JobMaster stopped (the JobManager
	// renews a job's delegation tokens in it).
	WhileRunning func(ctx context.Context, jobID string, jobConfig map[string]string)
}

// Dispatcher runs jobs.
type Dispatcher struct {
	cfg  Config
	rm   ResourceManager
	log  zerolog.Logger
	mb   *mailbox.Mailbox
	jobs map[string]*jobmaster.JobMaster
	// ended has a channel per submitted job, closed once it is archived.
	ended map[string]chan struct{}
	// archived holds ended jobs, oldest first.
	archived []archivedJob
	runCtx   context.Context
	wg       sync.WaitGroup
}

type archivedJob struct {
	id       string
	snapshot jobmaster.Snapshot
	// checkpoints are the job's checkpoint views as it ended.
	checkpoints jobmaster.CheckpointView
	// resultDropped is set once its accumulator results were dropped to
	// keep the history within Config.ResultCacheBytes.
	resultDropped bool
}

// New returns a Dispatcher; call Run.
func New(cfg Config, rm ResourceManager, log zerolog.Logger) *Dispatcher {
	if cfg.MaxArchivedJobs <= 0 {
		cfg.MaxArchivedJobs = 1000
	}
	if cfg.ResultCacheBytes <= 0 {
		cfg.ResultCacheBytes = 50 << 20
	}
	if cfg.Cluster == nil {
		cfg.Cluster = conf.NewConfiguration()
	}
	return &Dispatcher{cfg: cfg, rm: rm, log: log, mb: mailbox.New(), jobs: map[string]*jobmaster.JobMaster{}, ended: map[string]chan struct{}{}}
}

// Run serves until ctx ends, then stops every JobMaster and waits for them.
func (d *Dispatcher) Run(ctx context.Context) {
	jobsCtx, cancel := context.WithCancel(context.Background())
	d.runCtx = jobsCtx
	d.mb.Run(ctx)
	cancel()
	d.wg.Wait()
}

func randomJobID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// jobConfig overlays the job's own configuration on the cluster's, for the
// options that are per job in Flink (scheduling, restart, failover).
func (d *Dispatcher) jobConfig(jg *jobgraph.JobGraph) (*conf.Configuration, error) {
	c := d.cfg.Cluster.Clone()
	var problems []string
	for k, v := range jg.Config {
		if _, known := conf.Lookup(k); !known {
			continue // user configuration for the job's own code
		}
		if err := c.Set(k, v, conf.DynamicSource); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		return nil, &jobgraph.ValidationError{Problems: problems}
	}
	return c, nil
}

// runnerKeys are the settings a job's runners act on; they read them from
// the job's configuration, which travels in every deployment.
var runnerKeys = []string{conf.CheckpointingInterval.Key(), conf.CheckpointingMode.Key(),
	conf.StateBackendType.Key(), conf.StateBackendIncremental.Key(), conf.LocalRecovery.Key()}

// shipRunnerSettings puts the job's effective runnerKeys, cluster defaults
// included, into its configuration.
func shipRunnerSettings(jg *jobgraph.JobGraph, c *conf.Configuration) {
	for _, k := range runnerKeys {
		if e, ok := c.Lookup(k); ok {
			if jg.Config == nil {
				jg.Config = map[string]string{}
			}
			jg.Config[k] = e.Raw
		}
	}
}

func (d *Dispatcher) jobMasterConfig(c *conf.Configuration) jobmaster.Config {
	cfg := jobmaster.Config{
		Scheduler:           scheduler.ConfigFromConf(c),
		HeartbeatInterval:   conf.HeartbeatInterval.Get(c),
		HeartbeatTimeout:    conf.HeartbeatTimeout.Get(c),
		RPCFailureThreshold: conf.HeartbeatRPCFailureThreshold.Get(c),
		Address:             d.cfg.Address,
		Checkpoint:          checkpoint.ConfigFromConf(c),
		// execution.savepoint.path is per job: the job's configuration
		// (jobgraph Config) overlays the cluster's.
		SavepointPath:        conf.SavepointPath.Get(c),
		IgnoreUnclaimedState: conf.SavepointIgnoreUnclaimedState.Get(c),
		Storage:              storage.OptionsFromConf(c),
	}
	if d.cfg.JobMasterOptions != nil {
		d.cfg.JobMasterOptions(&cfg)
	}
	return cfg
}

// SubmitJob implements rest.Dispatcher.
func (d *Dispatcher) SubmitJob(ctx context.Context, jg *jobgraph.JobGraph) (string, error) {
	if err := jobgraph.ValidateJobID(jg.JobID); err != nil {
		return "", err
	}
	// Only the JobManager names a job's staged tokens.
	delete(jg.Config, restapi.JobConfigDelegationTokensFile)
	if d.cfg.PrepareJob != nil {
		if jg.JobID == "" {
			jg.JobID = randomJobID()
		}
		if err := d.cfg.PrepareJob(ctx, jg); err != nil {
			return "", err
		}
	}
	delete(jg.Config, restapi.JobConfigDelegationTokens)
	return d.submit(ctx, jg, false)
}

// submit starts a job; recovered: a former leader accepted it (its graph
// is stored already and it restores from its latest checkpoint).
func (d *Dispatcher) submit(ctx context.Context, jg *jobgraph.JobGraph, recovered bool) (string, error) {
	if err := jg.Validate(); err != nil {
		return "", err
	}
	c, err := d.jobConfig(jg)
	if err != nil {
		return "", err
	}
	shipRunnerSettings(jg, c)
	jmCfg := d.jobMasterConfig(c)
	if d.cfg.HA != nil {
		if jg.JobID == "" {
			jg.JobID = randomJobID()
		}
		if err := d.prepareHA(ctx, jg, &jmCfg, recovered); err != nil {
			return "", err
		}
	}
	// Read the savepoint here, off the mailbox: a missing or corrupt one,
	// or state the job cannot claim, fails the submission.
	restored, err := jobmaster.ReadSavepoint(ctx, jmCfg, jg)
	if err != nil {
		return "", fmt.Errorf("%w: %w", restapi.ErrBadRequest, err)
	}
	jmCfg.Restored = restored
	return mailbox.Call(ctx, d.mb, func() (string, error) {
		if jg.JobID == "" {
			jg.JobID = randomJobID()
		}
		if d.jobs[jg.JobID] != nil || d.archivedIndex(jg.JobID) >= 0 {
			return "", fmt.Errorf("%w: %s", restapi.ErrDuplicateJob, jg.JobID)
		}
		jm, err := jobmaster.New(jmCfg, jg, d.rm, d.log)
		if err != nil {
			var ve *jobgraph.ValidationError
			if errors.As(err, &ve) || errors.Is(err, scheduler.ErrInvalidConfig) {
				return "", fmt.Errorf("%w: %w", restapi.ErrBadRequest, err)
			}
			return "", err
		}
		d.jobs[jg.JobID] = jm
		d.ended[jg.JobID] = make(chan struct{})
		d.wg.Add(1)
		stop := d.whileRunning(jg)
		go func() {
			defer d.wg.Done()
			jm.Run(d.runCtx)
			stop()
			d.mb.Post(func() { d.archive(jm) })
		}()
		d.log.Info().Str("job_id", jg.JobID).Str("job", jg.Name).Int("vertices", len(jg.Vertices)).Bool("recovered", recovered).Msg("job submitted")
		return jg.JobID, nil
	})
}

// whileRunning starts Config.WhileRunning for the job; the returned stop
// ends it and waits for it.
func (d *Dispatcher) whileRunning(jg *jobgraph.JobGraph) (stop func()) {
	if d.cfg.WhileRunning == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(d.runCtx)
	done := make(chan struct{})
	id, cfg := jg.JobID, maps.Clone(jg.Config)
	go func() {
		defer close(done)
		d.cfg.WhileRunning(ctx, id, cfg)
	}()
	return func() { cancel(); <-done }
}

func (d *Dispatcher) archive(jm *jobmaster.JobMaster) {
	snap, _ := jm.Snapshot(context.Background()) // returns the final views once Done
	delete(d.jobs, jm.JobID())
	d.archived = append(d.archived, archivedJob{id: jm.JobID(), snapshot: snap, checkpoints: jm.CheckpointView()})
	closeEnded := func() {
		if ch := d.ended[jm.JobID()]; ch != nil {
			close(ch)
			delete(d.ended, jm.JobID())
		}
	}
	if hook := d.cfg.OnGloballyTerminal; hook != nil && jm.Result().Status.IsGloballyTerminal() {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			hook(jm.JobID())
			d.mb.Post(closeEnded)
		}()
	} else {
		closeEnded()
	}
	if over := len(d.archived) - d.cfg.MaxArchivedJobs; over > 0 {
		d.archived = append(d.archived[:0], d.archived[over:]...)
	}
	d.dropOldResults()
	r := jm.Result()
	ev := d.log.Info()
	if r.Cause != nil {
		ev = d.log.Warn().Err(r.Cause)
	}
	ev.Str("job_id", jm.JobID()).Str("status", r.Status.String()).Msg("job ended")
	if d.cfg.HA != nil && r.Status.IsGloballyTerminal() {
		res := d.archived[len(d.archived)-1].snapshot.Result
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.recordTerminal(jm.JobID(), r.Status.String(), res)
		}()
	}
}

// dropOldResults drops the accumulator results of the oldest ended jobs
// until the history's are within Config.ResultCacheBytes, never the newest
// job's. It runs on the mailbox.
func (d *Dispatcher) dropOldResults() {
	var total int64
	for _, a := range d.archived {
		total += resultBytes(a.snapshot.Result)
	}
	for i := 0; total > d.cfg.ResultCacheBytes && i < len(d.archived)-1; i++ {
		a := &d.archived[i]
		n := resultBytes(a.snapshot.Result)
		if n == 0 {
			continue
		}
		total -= n
		a.snapshot.Result, a.resultDropped = nil, true
		d.log.Info().Str("job_id", a.id).Int64("bytes", n).Int64("cache_size", d.cfg.ResultCacheBytes).
			Msg("dropped an ended job's accumulator results (jobstore.cache-size)")
	}
}

func resultBytes(r *restapi.JobExecutionResult) int64 {
	if r == nil {
		return 0
	}
	var n int64
	for name, v := range r.AccumulatorResults {
		n += int64(len(name) + len(v))
	}
	return n
}

// WaitJob blocks until the job ended (its JobMaster stopped and the job is
// archived) or ctx ends, and returns the job's final state (FINISHED,
// FAILED, CANCELED, ...). Per-job and application JobManagers call it to
// learn when to shut down. An unknown job: restapi.ErrJobNotFound.
func (d *Dispatcher) WaitJob(ctx context.Context, id string) (string, error) {
	ch, err := mailbox.Call(ctx, d.mb, func() (chan struct{}, error) {
		if ch := d.ended[id]; ch != nil {
			return ch, nil
		}
		if d.archivedIndex(id) >= 0 {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: %s", restapi.ErrJobNotFound, id)
	})
	if err != nil {
		return "", err
	}
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	det, err := d.JobDetails(ctx, id)
	if err != nil {
		return "", err
	}
	return det.State, nil
}

func (d *Dispatcher) archivedIndex(id string) int {
	for i, a := range d.archived {
		if a.id == id {
			return i
		}
	}
	return -1
}

// view is a job as the Dispatcher knows it: running (jm set) or archived.
type view struct {
	jm            *jobmaster.JobMaster
	archived      *jobmaster.Snapshot
	checkpoints   *jobmaster.CheckpointView // archived
	resultDropped bool
}

func (d *Dispatcher) lookup(ctx context.Context, id string) (view, error) {
	return mailbox.Call(ctx, d.mb, func() (view, error) {
		if jm := d.jobs[id]; jm != nil {
			return view{jm: jm}, nil
		}
		if i := d.archivedIndex(id); i >= 0 {
			s, ck := d.archived[i].snapshot, d.archived[i].checkpoints
			return view{archived: &s, checkpoints: &ck, resultDropped: d.archived[i].resultDropped}, nil
		}
		return view{}, fmt.Errorf("%w: %s", restapi.ErrJobNotFound, id)
	})
}

func (v view) snapshot(ctx context.Context) (jobmaster.Snapshot, error) {
	if v.archived != nil {
		return *v.archived, nil
	}
	return v.jm.Snapshot(ctx)
}

// all lists every job's snapshot, running ones first in submission order.
func (d *Dispatcher) all(ctx context.Context) ([]jobmaster.Snapshot, error) {
	type lists struct {
		running  []*jobmaster.JobMaster
		archived []jobmaster.Snapshot
	}
	l, err := mailbox.Call(ctx, d.mb, func() (lists, error) {
		var out lists
		for _, jm := range d.jobs {
			out.running = append(out.running, jm)
		}
		for _, a := range d.archived {
			out.archived = append(out.archived, a.snapshot)
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	var out []jobmaster.Snapshot
	for _, jm := range l.running {
		s, err := jm.Snapshot(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return append(out, l.archived...), nil
}

// ListJobs implements rest.Dispatcher.
func (d *Dispatcher) ListJobs(ctx context.Context) (restapi.JobIDsWithStatus, error) {
	snaps, err := d.all(ctx)
	out := restapi.JobIDsWithStatus{Jobs: []restapi.JobIDStatus{}}
	for _, s := range snaps {
		out.Jobs = append(out.Jobs, restapi.JobIDStatus{ID: s.Overview.ID, Status: s.Overview.State})
	}
	return out, err
}

// JobsOverview implements rest.Dispatcher.
func (d *Dispatcher) JobsOverview(ctx context.Context) (restapi.MultipleJobsDetails, error) {
	snaps, err := d.all(ctx)
	out := restapi.MultipleJobsDetails{Jobs: []restapi.JobOverview{}}
	for _, s := range snaps {
		out.Jobs = append(out.Jobs, s.Overview)
	}
	return out, err
}

// JobDetails implements rest.Dispatcher.
func (d *Dispatcher) JobDetails(ctx context.Context, id string) (restapi.JobDetails, error) {
	v, err := d.lookup(ctx, id)
	if err != nil {
		return restapi.JobDetails{}, err
	}
	s, err := v.snapshot(ctx)
	return s.Details, err
}

// JobExceptions implements rest.Dispatcher.
func (d *Dispatcher) JobExceptions(ctx context.Context, id string) (restapi.JobExceptions, error) {
	v, err := d.lookup(ctx, id)
	if err != nil {
		return restapi.JobExceptions{}, err
	}
	s, err := v.snapshot(ctx)
	return s.Exceptions, err
}

// JobExecutionResult implements rest.Dispatcher.
func (d *Dispatcher) JobExecutionResult(ctx context.Context, id string) (restapi.JobExecutionResultResponse, error) {
	v, err := d.lookup(ctx, id)
	if err != nil {
		return restapi.JobExecutionResultResponse{}, err
	}
	if v.resultDropped {
		return restapi.JobExecutionResultResponse{}, fmt.Errorf("%w: the accumulator results of job %s were dropped to keep the ended jobs' within jobstore.cache-size (%d bytes); its status and details are still kept",
			restapi.ErrResultGone, id, d.cfg.ResultCacheBytes)
	}
	s, err := v.snapshot(ctx)
	if err != nil {
		return restapi.JobExecutionResultResponse{}, err
	}
	if s.Result == nil {
		return restapi.JobExecutionResultResponse{Status: restapi.QueueStatus{ID: restapi.ResultInProgress}}, nil
	}
	return restapi.JobExecutionResultResponse{Status: restapi.QueueStatus{ID: restapi.ResultCompleted}, ExecutionResult: s.Result}, nil
}

// CancelJob implements rest.Dispatcher.
func (d *Dispatcher) CancelJob(ctx context.Context, id string) error {
	v, err := d.lookup(ctx, id)
	if err != nil {
		return err
	}
	if v.archived != nil {
		return fmt.Errorf("%w: job %s already ended %s", restapi.ErrJobNotCancellable, id, v.archived.Overview.State)
	}
	return v.jm.Cancel(ctx)
}

// Overview implements rest.Dispatcher.
func (d *Dispatcher) Overview(ctx context.Context) (restapi.ClusterOverview, error) {
	tms, total, free, err := d.rm.Overview(ctx)
	if err != nil {
		return restapi.ClusterOverview{}, err
	}
	snaps, err := d.all(ctx)
	if err != nil {
		return restapi.ClusterOverview{}, err
	}
	out := restapi.ClusterOverview{TaskManagers: tms, SlotsTotal: total, SlotsAvailable: free, Version: d.cfg.Version}
	for _, s := range snaps {
		switch s.Overview.State {
		case scheduler.JobFinished.String():
			out.JobsFinished++
		case scheduler.JobCanceled.String():
			out.JobsCancelled++
		case scheduler.JobFailed.String():
			out.JobsFailed++
		default:
			out.JobsRunning++
		}
	}
	return out, nil
}

// TaskManagers implements rest.Dispatcher.
func (d *Dispatcher) TaskManagers(ctx context.Context) (restapi.TaskManagersInfo, error) {
	tms, err := d.rm.TaskManagers(ctx)
	if tms == nil {
		tms = []restapi.TaskManagerInfo{}
	}
	return restapi.TaskManagersInfo{TaskManagers: tms}, err
}

// TaskManager implements rest.Dispatcher.
func (d *Dispatcher) TaskManager(ctx context.Context, id string) (restapi.TaskManagerInfo, error) {
	return d.rm.TaskManager(ctx, id)
}

// JobMasterService routes the TaskManagers' calls to the job's JobMaster.
func (d *Dispatcher) JobMasterService() pb.JobMasterServiceServer { return jobMasterRouter{d: d} }

type jobMasterRouter struct {
	pb.UnimplementedJobMasterServiceServer
	d *Dispatcher
}

func (r jobMasterRouter) jobMaster(ctx context.Context, jobID string) (*jobmaster.JobMaster, error) {
	if err := ids.JobID("job_id", jobID); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	v, err := r.d.lookup(ctx, jobID)
	if err != nil {
		return nil, status.Error(codes.NotFound, err.Error())
	}
	if v.jm == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "dispatcher: job %s has ended", jobID)
	}
	return v.jm, nil
}

func (r jobMasterRouter) RegisterTaskManager(ctx context.Context, req *pb.RegisterTaskManagerRequest) (*pb.RegisterTaskManagerResponse, error) {
	jm, err := r.jobMaster(ctx, req.JobId)
	if err != nil {
		return nil, err
	}
	return jm.RegisterTaskManager(ctx, req)
}

func (r jobMasterRouter) OfferSlots(ctx context.Context, req *pb.OfferSlotsRequest) (*pb.OfferSlotsResponse, error) {
	jm, err := r.jobMaster(ctx, req.JobId)
	if err != nil {
		return nil, err
	}
	return jm.OfferSlots(ctx, req)
}

func (r jobMasterRouter) UpdateTaskExecutionState(ctx context.Context, req *pb.UpdateTaskExecutionStateRequest) (*pb.Ack, error) {
	jm, err := r.jobMaster(ctx, req.JobId)
	if err != nil {
		return nil, err
	}
	return jm.UpdateTaskExecutionState(ctx, req)
}

func (r jobMasterRouter) DisconnectTaskManager(ctx context.Context, req *pb.DisconnectTaskManagerRequest) (*pb.Ack, error) {
	jm, err := r.jobMaster(ctx, req.JobId)
	if err != nil {
		return nil, err
	}
	return jm.DisconnectTaskManager(ctx, req)
}

func (r jobMasterRouter) AcknowledgeCheckpoint(ctx context.Context, req *pb.AcknowledgeCheckpointRequest) (*pb.Ack, error) {
	jm, err := r.jobMaster(ctx, req.JobId)
	if err != nil {
		return nil, err
	}
	return jm.AcknowledgeCheckpoint(ctx, req)
}

func (r jobMasterRouter) DeclineCheckpoint(ctx context.Context, req *pb.DeclineCheckpointRequest) (*pb.Ack, error) {
	jm, err := r.jobMaster(ctx, req.JobId)
	if err != nil {
		return nil, err
	}
	return jm.DeclineCheckpoint(ctx, req)
}

func (r jobMasterRouter) NotifyEndOfData(ctx context.Context, req *pb.NotifyEndOfDataRequest) (*pb.Ack, error) {
	jm, err := r.jobMaster(ctx, req.JobId)
	if err != nil {
		return nil, err
	}
	return jm.NotifyEndOfData(ctx, req)
}

func (r jobMasterRouter) SendOperatorEventToCoordinator(ctx context.Context, req *pb.OperatorEventRequest) (*pb.Ack, error) {
	jm, err := r.jobMaster(ctx, req.JobId)
	if err != nil {
		return nil, err
	}
	return jm.SendOperatorEventToCoordinator(ctx, req)
}

func (r jobMasterRouter) GetBlob(ctx context.Context, req *pb.GetBlobRequest) (*pb.GetBlobResponse, error) {
	jm, err := r.jobMaster(ctx, req.JobId)
	if err != nil {
		return nil, err
	}
	return jm.GetBlob(ctx, req)
}

func (r jobMasterRouter) ReportPartitionsLost(ctx context.Context, req *pb.ReportPartitionsLostRequest) (*pb.Ack, error) {
	jm, err := r.jobMaster(ctx, req.JobId)
	if err != nil {
		return nil, err
	}
	return jm.ReportPartitionsLost(ctx, req)
}

// JobVertex returns one vertex's subtasks with their attempts and locations.
func (d *Dispatcher) JobVertex(ctx context.Context, jobID, vertexID string) (restapi.JobVertexInfo, error) {
	v, err := d.lookup(ctx, jobID)
	if err != nil {
		return restapi.JobVertexInfo{}, err
	}
	s, err := v.snapshot(ctx)
	if err != nil {
		return restapi.JobVertexInfo{}, err
	}
	info, ok := s.Vertices[vertexID]
	if !ok {
		return restapi.JobVertexInfo{}, fmt.Errorf("%w: job %s has no vertex %s", restapi.ErrJobNotFound, jobID, vertexID)
	}
	return info, nil
}
