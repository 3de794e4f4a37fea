package taskmanager

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gofl/gofl/failure"
	"github.com/gofl/gofl/internal/blob"
	"github.com/gofl/gofl/internal/clock"
	"github.com/gofl/gofl/internal/ids"
	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/rpc/restapi"
	"github.com/gofl/gofl/storage"
	"github.com/gofl/gofl/taskmanager/runner"
)

// errRunnerReleased fails a task whose job was released here before its
// runner served it.
var errRunnerReleased = errors.New("taskmanager: the job's runner was released")

// runnerPool keeps one job runner process per job: the job binary, fetched
// from the JobManager's BlobService into a local verified cache (Flink's
// library cache), started on a job's first task and again after it died.
// It is safe for concurrent use: the mailbox asks for data addresses and
// releases, task goroutines for runners. It owns the goroutines of the
// tasks it runs and of the runners it watches; close waits for them.
type runnerPool struct {
	dir   string
	cache *blob.Cache
	dial  func(addr string) (*grpc.ClientConn, error)
	// listen opens a data port: the listener a job's runners inherit and
	// its advertised address.
	listen func() (*net.TCPListener, string, error)
	log    zerolog.Logger
	clk    clock.Clock
	grace  time.Duration
	// rpcTimeout bounds each call to a runner or for offloaded data.
	rpcTimeout time.Duration
	// metricsInterval is how often runners sample their tasks' metrics;
	// heartbeatInterval and heartbeatTimeout watch their liveness.
	metricsInterval, heartbeatInterval, heartbeatTimeout time.Duration
	// stagingDir is Config.StagingDir: job binaries staged there on this
	// host's disk are linked, not fetched.
	stagingDir string
	// env is added to every runner's environment (Config.RunnerEnv).
	env []string
	// storage is the TaskManager's HDFS client options (Config.Storage).
	storage storage.Options
	// tokens are the cluster's delegation tokens from the ResourceManager
	// (nil: none): once received they replace the login of storage and env.
	tokens *delegationTokens
	// onLost is TaskRunnerHost.RunnerLost.
	onLost func(jobID string, runner uint64, cause error)
	// onCheckpoint is TaskRunnerHost.CheckpointReport.
	onCheckpoint func(jobID string, r *pb.RunnerCheckpointReport)

	mu   sync.Mutex
	jobs map[string]*jobRunner
	// linking are the staged binaries being linked (linkStaged), so a
	// task arriving during the early link (prelink) waits for it instead
	// of reading the binary a second time.
	linking map[string]chan struct{}
	blobs   map[string][]byte // offloaded shuffle descriptors by key
	seq     uint64
	closed  bool
	wg      sync.WaitGroup // added to only under mu while !closed
}

// jobRunner is one job on this TaskManager: its data port, opened when the
// job first needs an address (its JobMaster registration) and closed when
// the job is released, and the runner serving it. Every runner of the job
// inherits the same port, so the address the JobMaster knows stays valid
// for as long as the job is here, across runner restarts.
type jobRunner struct {
	jobID    string
	lis      *net.TCPListener // nil: no data port
	addr     string
	released bool
	cur      *runnerEntry // the current runner incarnation, nil if none
}

// runnerEntry is one runner incarnation; ready closes once its start ended.
type runnerEntry struct {
	id    uint64
	ready chan struct{}
	proc  *runner.Process
	err   error
	// ahead is the job information a runner started ahead of the job's
	// first task (prestart) was started with, until a task's matched it
	// (then nil); a task bringing other information gets a new runner.
	ahead *pb.JobInformation
	// replaced: stopped because it did not match (not lost).
	replaced bool
}

func newRunnerPool(dir string, log zerolog.Logger) (*runnerPool, error) {
	store, err := blob.Open(filepath.Join(dir, "blobs"))
	if err != nil {
		return nil, err
	}
	return &runnerPool{dir: dir, cache: blob.NewCache(store), log: log, clk: clock.Real, grace: 5 * time.Second,
		jobs: map[string]*jobRunner{}, blobs: map[string][]byte{}, linking: map[string]chan struct{}{}}, nil
}

// job returns the job's entry, creating it (and its data port) if needed.
func (p *runnerPool) job(jobID string) (*jobRunner, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errRunnerReleased
	}
	jr := p.jobs[jobID]
	if jr == nil {
		jr = &jobRunner{jobID: jobID}
		if lis, addr, err := p.listen(); err != nil {
			p.log.Warn().Err(err).Str("job_id", jobID).Msg("cannot open a data port for the job; its runner will have none")
		} else {
			jr.lis, jr.addr = lis, addr
		}
		p.jobs[jobID] = jr
	}
	return jr, nil
}

func (p *runnerPool) dataAddress(jobID string) (string, error) {
	jr, err := p.job(jobID)
	if err != nil {
		return "", err
	}
	return jr.addr, nil
}

// get returns the job's runner and its incarnation, starting one if none
// is up. It blocks while the binary is fetched and the runner starts;
// concurrent callers share one start.
func (p *runnerPool) get(ctx context.Context, jr *jobRunner, jobMasterAddress string, info *pb.JobInformation) (*runner.Process, uint64, error) {
	for attempt := 0; ; attempt++ {
		p.mu.Lock()
		if jr.released || p.closed {
			p.mu.Unlock()
			return nil, 0, errRunnerReleased
		}
		e := jr.cur
		if e == nil {
			e = p.newEntry(jr)
			p.mu.Unlock()
			p.startEntry(ctx, jr, e, jobMasterAddress, info)
		} else {
			p.mu.Unlock()
			select {
			case <-e.ready:
			case <-ctx.Done():
				return nil, 0, ctx.Err()
			}
		}
		alive := e.err == nil
		if alive {
			select {
			case <-e.proc.Exited():
				alive = false
			default:
			}
		}
		if alive && !p.matchesAhead(jr, e, info) {
			// Started ahead with other information: replaced, which is no
			// failed attempt.
			e.proc.Stop(p.grace)
			attempt--
			continue
		}
		if alive {
			return e.proc, e.id, nil
		}
		p.mu.Lock()
		if jr.cur == e {
			jr.cur = nil // a failed or dead runner is started afresh
		}
		p.mu.Unlock()
		if e.err == nil {
			// The dead runner's connection and watchers outlive its
			// process until stopped (Stop is idempotent, and quick now).
			e.proc.Stop(p.grace)
		}
		if e.err != nil || attempt > 0 {
			if e.err != nil {
				return nil, 0, e.err
			}
			return nil, 0, failure.EnvironmentError(e.proc.Err())
		}
	}
}

// newEntry makes a new runner incarnation the job's current one. Call with
// mu held.
func (p *runnerPool) newEntry(jr *jobRunner) *runnerEntry {
	p.seq++
	e := &runnerEntry{id: p.seq, ready: make(chan struct{})}
	jr.cur = e
	return e
}

// startEntry starts e's runner and closes its ready channel.
func (p *runnerPool) startEntry(ctx context.Context, jr *jobRunner, e *runnerEntry, jobMasterAddress string, info *pb.JobInformation) {
	e.proc, e.err = p.start(ctx, jr, jobMasterAddress, info)
	p.mu.Lock()
	if e.err == nil {
		p.watch(jr, e) // a released job's release stops it once ready
	}
	p.mu.Unlock()
	close(e.ready)
}

// matchesAhead reports whether a task with info may use e: yes unless e
// was started ahead (prestart) with other job information, in which case
// e stops being the job's current runner.
func (p *runnerPool) matchesAhead(jr *jobRunner, e *runnerEntry, info *pb.JobInformation) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.ahead == nil {
		return true
	}
	if proto.Equal(e.ahead, info) {
		e.ahead = nil
		return true
	}
	if jr.cur == e {
		jr.cur = nil
	}
	e.replaced = true
	p.log.Info().Str("job_id", jr.jobID).Uint64("runner", e.id).Msg("the runner started ahead does not match the job's tasks; starting another")
	return false
}

// prestart starts a per-job cluster's runner ahead of the job's first task,
// from the staged JobGraph at graphURI and the job binary key (prelinked):
// the runner's start (the binary's exec and the job's re-planning) then
// overlaps the slot offers and the deployment instead of following them.
// The first task checks that its job information is the one the runner
// started with (matchesAhead). Nothing when the binary is not on this
// host's staging disk or the graph cannot be read: the first task starts
// the runner as in a session.
func (p *runnerPool) prestart(graphURI, key string) {
	p.goUnlessClosed(func() {
		ctx, cancel := context.WithTimeout(context.Background(), p.rpcTimeout)
		defer cancel()
		info, err := p.stagedJobInfo(ctx, graphURI, key)
		if err != nil {
			p.log.Debug().Err(err).Str("uri", graphURI).Msg("not starting the job's runner ahead")
			return
		}
		p.linkStaged(key)
		if !p.cache.Store().Has(key) {
			return
		}
		jr, err := p.job(info.JobId)
		if err != nil {
			return
		}
		p.mu.Lock()
		if jr.released || p.closed || jr.cur != nil {
			p.mu.Unlock()
			return
		}
		e := p.newEntry(jr)
		e.ahead = info
		p.mu.Unlock()
		p.startEntry(context.Background(), jr, e, "", info)
		if e.err != nil {
			p.log.Debug().Err(e.err).Str("job_id", info.JobId).Msg("starting the job's runner ahead failed; its first task starts one")
		}
	})
}

// stagedJobInfo is the JobInformation the JobMaster sends with the tasks
// of the staged JobGraph at uri whose job binary is key.
func (p *runnerPool) stagedJobInfo(ctx context.Context, uri, key string) (*pb.JobInformation, error) {
	fsys, path, err := storage.Open(ctx, uri, p.storage)
	if err != nil {
		return nil, err
	}
	defer fsys.Close()
	b, err := storage.ReadFile(ctx, fsys, path)
	if err != nil {
		return nil, err
	}
	g, err := jobgraph.Unmarshal(b)
	if err != nil {
		return nil, fmt.Errorf("taskmanager: the staged JobGraph %s: %w", uri, err)
	}
	g.BinaryKey = key // the binary this TaskManager linked, as the JobMaster sends it
	return jobgraph.JobInformation(g), nil
}

// watch reports the runner's end unless the job was released first. Call
// with mu held.
func (p *runnerPool) watch(jr *jobRunner, e *runnerEntry) {
	if p.closed {
		return // close stops it
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		<-e.proc.Exited()
		p.mu.Lock()
		lost := !jr.released && !p.closed && !e.replaced
		if jr.cur == e {
			jr.cur = nil
		}
		p.mu.Unlock()
		// Its connection and watchers outlive the process until stopped
		// (idempotent, and quick once it exited).
		e.proc.Stop(p.grace)
		if lost {
			p.log.Warn().Err(e.proc.Err()).Str("job_id", jr.jobID).Uint64("runner", e.id).Msg("job runner died")
			p.onLost(jr.jobID, e.id, e.proc.Err())
		}
	}()
}

func (p *runnerPool) start(ctx context.Context, jr *jobRunner, jobMasterAddress string, info *pb.JobInformation) (*runner.Process, error) {
	key := info.JobBinaryKey
	path, err := p.fetchBinary(ctx, jobMasterAddress, key)
	if err != nil {
		return nil, err
	}
	env := p.runnerEnv()
	if par := info.Config["parallelism.default"]; par != "" {
		env = append(env, runner.EnvParallelism+"="+par)
	}
	localState, err := p.localStateDir(jr.jobID)
	if err != nil {
		return nil, failure.NonRecoverable(err)
	}
	jobDir, err := ids.Join(p.dir, "jobs", jr.jobID)
	if err != nil {
		return nil, failure.NonRecoverable(fmt.Errorf("taskmanager: the job's runner directory: %w", err))
	}
	env = append(env, runner.EnvLocalStateDir+"="+localState)
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, runner.EnvTmpDirs+"=") }) {
		env = append(env, runner.EnvTmpDirs+"="+jobDir) // io.tmp.dirs' default: the work directory
	}
	if uri := info.Config[restapi.JobConfigDelegationTokensFile]; uri != "" {
		if env, err = p.jobTokenEnv(ctx, jr.jobID, uri, jobDir, env); err != nil {
			return nil, err
		}
	}
	proc, err := runner.Start(ctx, runner.Spec{JobID: jr.jobID, Binary: path, Args: info.ProgramArgs, Fingerprint: info.Fingerprint,
		Dir: jobDir, DataListener: jr.lis, DataAddress: jr.addr, Env: env,
		MetricsInterval: p.metricsInterval, HeartbeatInterval: p.heartbeatInterval, HeartbeatTimeout: p.heartbeatTimeout, Clock: p.clk,
		OnCheckpoint: p.checkpointReporter(jr.jobID)}, p.log)
	if err != nil {
		if status.Code(errors.Unwrap(err)) == codes.FailedPrecondition || errors.Is(err, runner.ErrFingerprintMismatch) {
			// A protocol or graph mismatch does not go away by retrying.
			return nil, failure.NonRecoverable(err)
		}
		return nil, failure.EnvironmentError(err)
	}
	return proc, nil
}

// runnerEnv is the environment every new runner starts with: Config's,
// with the ResourceManager's delegation tokens once received.
func (p *runnerPool) runnerEnv() []string {
	env := slices.Clone(p.env)
	if f := p.tokens.file(); f != "" {
		env = withTokenFile(env, f)
	}
	return env
}

// storageOptions are the TaskManager's HDFS client options, with the
// ResourceManager's delegation tokens once received.
func (p *runnerPool) storageOptions() storage.Options {
	opts := p.storage
	if f := p.tokens.file(); f != "" {
		opts.DelegationTokenFile = f
		opts.Kerberos.Keytab, opts.Kerberos.UseTicketCache = "", false
	}
	return opts
}

// fetchBinary returns the local path of the job binary key, fetched from
// the BlobService at jobMasterAddress into the verified cache if it is not
// there yet. It blocks until the binary is local or ctx ends. Concurrent
// callers share one download, which owns its connection: the caller that
// started it may give up without failing the others.
func (p *runnerPool) fetchBinary(ctx context.Context, jobMasterAddress, key string) (string, error) {
	fetch := func(ctx context.Context) (io.ReadCloser, error) {
		cc, err := p.dial(jobMasterAddress)
		if err != nil {
			return nil, err
		}
		rc, err := blob.Fetcher(pb.NewBlobServiceClient(cc), key)(ctx)
		if err != nil {
			cc.Close()
			return nil, err
		}
		return &connReader{ReadCloser: rc, cc: cc}, nil
	}
	p.linkStaged(key)
	fetchCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	path, err := p.cache.Get(fetchCtx, key, fetch)
	switch {
	case errors.Is(err, blob.ErrDigestMismatch), errors.Is(err, blob.ErrInvalidKey), status.Code(errors.Unwrap(err)) == codes.NotFound:
		return "", failure.NonRecoverable(fmt.Errorf("job binary %s: %w", key, err))
	case err != nil:
		return "", failure.EnvironmentError(fmt.Errorf("job binary %s: %w", key, err))
	}
	if err := os.Chmod(path, 0o755); err != nil {
		return "", failure.EnvironmentError(fmt.Errorf("job binary %s: %w", key, err))
	}
	return path, nil
}

// linkStaged hard-links the job binary key from the staging blob cache into
// the library cache when that cache is on this host's disk and holds it:
// the bytes are checked, not copied or sent through the JobManager. Where
// it cannot (elsewhere, another file system, no such blob), the binary is
// fetched as usual.
func (p *runnerPool) linkStaged(key string) {
	store := p.cache.Store()
	if store.Has(key) {
		return
	}
	p.mu.Lock()
	if ch, ok := p.linking[key]; ok {
		p.mu.Unlock()
		<-ch // a local read: bounded
		return
	}
	ch := make(chan struct{})
	p.linking[key] = ch
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.linking, key)
		p.mu.Unlock()
		close(ch)
	}()
	src, ok := storage.LocalBlobPath(p.stagingDir, key)
	if !ok {
		return
	}
	if _, err := store.Link(src, key); err != nil && !errors.Is(err, fs.ErrNotExist) {
		p.log.Debug().Err(err).Str("key", key).Msg("linking the staged job binary failed; fetching it from the JobManager")
	}
}

// prelink links the staged job binary key in the background (linkStaged),
// before any task asks for it: a per-job or application cluster's
// TaskManager knows its job's binary at start (Config.JobBinary).
func (p *runnerPool) prelink(key string) {
	p.goUnlessClosed(func() { p.linkStaged(key) })
}

// goUnlessClosed runs f on a goroutine the pool's close waits for, unless
// the pool is closed already.
func (p *runnerPool) goUnlessClosed(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f()
	}()
}

// connReader is a download that closes its connection when closed.
type connReader struct {
	io.ReadCloser
	cc *grpc.ClientConn
}

func (r *connReader) Close() error {
	err := r.ReadCloser.Close()
	if cerr := r.cc.Close(); err == nil {
		err = cerr
	}
	return err
}

// running returns the job's runner if it is up, without starting one.
func (p *runnerPool) running(jobID string) *runner.Process {
	p.mu.Lock()
	var e *runnerEntry
	if jr := p.jobs[jobID]; jr != nil {
		e = jr.cur
	}
	p.mu.Unlock()
	if e == nil {
		return nil
	}
	select {
	case <-e.ready:
	default:
		return nil
	}
	if e.err != nil {
		return nil
	}
	select {
	case <-e.proc.Exited():
		return nil
	default:
	}
	return e.proc
}

// release ends the job here: its runner is stopped and its data port
// closed, off the caller's goroutine. Idempotent.
func (p *runnerPool) release(jobID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	jr := p.jobs[jobID]
	if jr == nil {
		return
	}
	delete(p.jobs, jobID)
	jr.released = true
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.stop(jr)
	}()
}

// stop ends a released job's runner, then closes its data port (after the
// runner: a new runner of the job must not get it). Blocking.
func (p *runnerPool) stop(jr *jobRunner) {
	p.mu.Lock()
	e := jr.cur
	p.mu.Unlock()
	if e != nil {
		<-e.ready
		if e.proc != nil {
			e.proc.Stop(p.grace)
		}
	}
	if jr.lis != nil {
		jr.lis.Close()
	}
	// The job's task-local state goes with it (after its runner, which
	// writes there). A new runner of the job started meanwhile loses its
	// copies, which costs only a local recovery.
	dir, err := p.localStateDir(jr.jobID)
	if err == nil {
		err = os.RemoveAll(dir)
	}
	if err != nil {
		p.log.Warn().Err(err).Str("job_id", jr.jobID).Msg("deleting the job's local state")
	}
}

// localStateDir is where the job's runners keep task-local state copies
// (state.backend.local-recovery): <work dir>/localState/<job-id>. It
// fails for a job ID that would leave the work dir.
func (p *runnerPool) localStateDir(jobID string) (string, error) {
	dir, err := ids.Join(p.dir, "localState", jobID)
	if err != nil {
		return "", fmt.Errorf("taskmanager: the job's local state directory: %w", err)
	}
	return dir, nil
}

// close releases every job and waits for every goroutine of the pool.
func (p *runnerPool) close() {
	p.mu.Lock()
	p.closed = true
	jobs := p.jobs
	p.jobs = map[string]*jobRunner{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, jr := range jobs {
		p.mu.Lock()
		jr.released = true
		p.mu.Unlock()
		wg.Add(1)
		go func() { defer wg.Done(); p.stop(jr) }()
	}
	wg.Wait()
	p.wg.Wait()
	p.cache.Close() // binary downloads in flight end too
}

// releasePartitions forwards a release to the job's runner, which holds
// the data, off the caller's goroutine.
func (p *runnerPool) releasePartitions(req *pb.ReleasePartitionsRequest) {
	proc := p.running(req.JobId)
	if proc == nil {
		return
	}
	p.goUnlessClosed(func() {
		ctx, cancel := context.WithTimeout(context.Background(), p.rpcTimeout)
		defer cancel()
		if err := proc.ReleasePartitions(ctx, req); err != nil {
			p.log.Debug().Err(err).Str("job_id", req.JobId).Msg("forwarding the partition release to the job runner failed")
		}
	})
}

// blob returns an offloaded blob of the job's JobMaster (shuffle
// descriptors), fetched once per key and verified against its digest.
func (p *runnerPool) blob(ctx context.Context, client pb.JobMasterServiceClient, jobID, key string) ([]byte, error) {
	p.mu.Lock()
	data, ok := p.blobs[key]
	p.mu.Unlock()
	if ok {
		return data, nil
	}
	resp, err := client.GetBlob(ctx, &pb.GetBlobRequest{JobId: jobID, Key: key})
	if err != nil {
		return nil, fmt.Errorf("fetching offloaded blob %s: %w", key, err)
	}
	sum := sha256.Sum256(resp.Data)
	if want := "sha256:" + hex.EncodeToString(sum[:]); want != key {
		return nil, fmt.Errorf("offloaded blob %s: digest mismatch (got %s)", key, want)
	}
	p.mu.Lock()
	if len(p.blobs) > 1024 {
		clear(p.blobs)
	}
	p.blobs[key] = resp.Data
	p.mu.Unlock()
	return resp.Data, nil
}

// checkpointReporter relays a runner's checkpoint reports of jobID.
func (p *runnerPool) checkpointReporter(jobID string) func(*pb.RunnerCheckpointReport) {
	if p.onCheckpoint == nil {
		return nil
	}
	return func(r *pb.RunnerCheckpointReport) { p.onCheckpoint(jobID, r) }
}

// remoteTask is a task running in its job's runner.
type remoteTask struct {
	pool    *runnerPool
	jobID   string
	attempt *pb.ExecutionAttemptID
	cancel  context.CancelFunc
	proc    atomic.Pointer[runner.Process]

	// calls are checkpoint messages waiting to go to the runner, in order;
	// sending is set while a goroutine of the pool works through them.
	mu      sync.Mutex
	calls   []func()
	sending bool
}

// TriggerCheckpoint implements CheckpointingTask: the trigger goes to the
// runner off the mailbox; a runner that cannot take it (gone, an older
// SDK, the task already ended there) has it declined.
func (t *remoteTask) TriggerCheckpoint(req *pb.TriggerCheckpointRequest) {
	t.enqueue(func() {
		proc := t.proc.Load()
		if proc == nil {
			t.decline(req, "the task is not deployed in the job runner yet")
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), t.pool.rpcTimeout)
		defer cancel()
		err := proc.TriggerCheckpoint(ctx, req)
		switch code := status.Code(errors.Unwrap(err)); {
		case err == nil:
		case code == codes.Unimplemented:
			t.decline(req, "the job binary's runner takes no checkpoints (built with an SDK without checkpoint support)")
		case code == codes.NotFound:
			t.decline(req, "the task no longer runs in the job runner")
		default:
			t.decline(req, fmt.Sprintf("forwarding the trigger to the job runner failed: %v", err))
		}
	}, func() { t.decline(req, "the TaskManager is shutting down") })
}

// SendOperatorEvent implements OperatorEventTask: the event goes to the
// runner off the mailbox, in order with the checkpoint calls. The runner
// is local (a Unix socket): it fails to take one only when it is dying or
// frozen, and then its tasks fail anyway (or its heartbeat timeout kills
// it); a reader that lives on notices the gap at the next event.
func (t *remoteTask) SendOperatorEvent(req *pb.OperatorEventRequest) {
	t.enqueue(func() {
		proc := t.proc.Load()
		if proc == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), t.pool.rpcTimeout)
		defer cancel()
		if err := proc.SendOperatorEventToTask(ctx, req); err != nil {
			t.pool.log.Warn().Err(err).Str("job_id", t.jobID).Str("operator_id", req.OperatorId).Int64("seq", req.Seq).
				Msg("forwarding an operator event to the job runner failed")
		}
	}, func() {})
}

// NotifyCheckpoint implements CheckpointingTask; best effort.
func (t *remoteTask) NotifyCheckpoint(req *pb.NotifyCheckpointRequest) {
	t.enqueue(func() {
		proc := t.proc.Load()
		if proc == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), t.pool.rpcTimeout)
		defer cancel()
		if err := proc.NotifyCheckpoint(ctx, req); err != nil {
			t.pool.log.Debug().Err(err).Str("job_id", t.jobID).Int64("checkpoint_id", req.CheckpointId).
				Msg("forwarding a checkpoint notice to the job runner failed")
		}
	}, func() {})
}

func (t *remoteTask) decline(req *pb.TriggerCheckpointRequest, reason string) {
	if t.pool.onCheckpoint != nil {
		t.pool.onCheckpoint(t.jobID, declineReport(req, reason))
	}
}

// enqueue runs call after the task's earlier checkpoint calls, on a
// goroutine of the pool; dropped runs instead if the pool closed.
func (t *remoteTask) enqueue(call, dropped func()) {
	t.mu.Lock()
	t.calls = append(t.calls, call)
	if t.sending {
		t.mu.Unlock()
		return
	}
	t.sending = true
	t.mu.Unlock()
	p := t.pool
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		t.mu.Lock()
		t.calls, t.sending = nil, false
		t.mu.Unlock()
		dropped()
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		for {
			t.mu.Lock()
			if len(t.calls) == 0 {
				t.sending = false
				t.mu.Unlock()
				return
			}
			call := t.calls[0]
			t.calls[0] = nil
			t.calls = t.calls[1:]
			t.mu.Unlock()
			call()
		}
	}()
}

func (t *remoteTask) Cancel() { t.cancel() }

func (t *remoteTask) Metrics() *pb.TaskIOMetrics {
	if proc := t.proc.Load(); proc != nil {
		return proc.Metrics(t.attempt)
	}
	return nil
}

// startTask runs a task in the job's runner: its goroutine forwards the
// deployment, relays the runner's state reports and forwards a
// cancellation (ctx ending), so the TaskExecutor's bookkeeping is the same
// as for built-in tasks.
func (p *runnerPool) startTask(ctx context.Context, cancel context.CancelFunc, req *pb.SubmitTaskRequest, tc TaskContext) RunningTask {
	t := &remoteTask{pool: p, jobID: req.JobId, attempt: req.Tdd.Attempt, cancel: cancel}
	jr, err := p.job(req.JobId)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil || p.closed {
		cancel()
		tc.Ended(TaskResult{Err: failure.EnvironmentError(errRunnerReleased)})
		return t
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer cancel()
		final, id, err := p.runTask(ctx, jr, req, tc, t)
		tc.Ended(TaskResult{Err: err, Final: final, Runner: id})
	}()
	return t
}

// runTask returns the task's final I/O metrics and accumulator results, as
// the runner reported them with the terminal state, and the runner's
// incarnation.
func (p *runnerPool) runTask(ctx context.Context, jr *jobRunner, req *pb.SubmitTaskRequest, tc TaskContext, t *remoteTask) (*pb.RunnerTaskState, uint64, error) {
	req, err := p.resolveOffloaded(ctx, tc.JobMaster, req)
	if err != nil {
		return nil, 0, failure.EnvironmentError(err)
	}
	proc, id, err := p.get(ctx, jr, tc.JobMasterAddress, req.Tdd.JobInformation)
	if err != nil {
		if errors.Is(err, errRunnerReleased) || ctx.Err() != nil {
			err = failure.EnvironmentError(err)
		}
		return nil, 0, err
	}
	t.proc.Store(proc)
	attempt := req.Tdd.Attempt
	states := proc.Watch(attempt)
	defer proc.Unwatch(attempt)
	submitCtx, cancel := context.WithTimeout(ctx, p.rpcTimeout)
	err = proc.Submit(submitCtx, req)
	cancel()
	if err != nil {
		return nil, id, failure.EnvironmentError(fmt.Errorf("submitting to the job runner: %w", err))
	}
	last := func() *pb.RunnerTaskState { return &pb.RunnerTaskState{Metrics: proc.Metrics(attempt)} }
	done := ctx.Done()
	var confirm chan struct{}
	for {
		select {
		case st := <-states:
			switch st.State {
			case StateInitializing, StateRunning:
				tc.State(st.State)
			case StateFinished:
				return st, id, nil
			case StateCanceled:
				return st, id, context.Canceled
			case StateFailed:
				return st, id, failure.Decode(st.Failure)
			}
		case <-done:
			done = nil
			cctx, cancel := context.WithTimeout(context.Background(), p.rpcTimeout)
			_ = proc.Cancel(cctx, req.JobId, attempt)
			cancel()
			ch := make(chan struct{})
			timer := p.clk.AfterFunc(p.rpcTimeout, func() { close(ch) })
			defer timer.Stop()
			confirm = ch
		case <-confirm:
			return last(), id, fmt.Errorf("the job runner did not confirm the cancellation within %v", p.rpcTimeout)
		case <-proc.Exited():
			return last(), id, failure.EnvironmentError(proc.Err())
		}
	}
}

// resolveOffloaded replaces offloaded shuffle descriptors by their inline
// form, fetched from the JobMaster (as Flink's TaskExecutor loads offloaded
// TDD data before it creates the task), so the runner needs no connection
// to the JobManager. req is not modified.
func (p *runnerPool) resolveOffloaded(ctx context.Context, client pb.JobMasterServiceClient, req *pb.SubmitTaskRequest) (*pb.SubmitTaskRequest, error) {
	var out *pb.SubmitTaskRequest
	for i, g := range req.Tdd.GetInputGates() {
		key := g.GetOffloadedBlobKey()
		if key == "" {
			continue
		}
		fctx, cancel := context.WithTimeout(ctx, p.rpcTimeout)
		data, err := p.blob(fctx, client, req.JobId, key)
		cancel()
		if err != nil {
			return nil, err
		}
		var list pb.ShuffleDescriptorList
		if err := proto.Unmarshal(data, &list); err != nil {
			return nil, fmt.Errorf("offloaded shuffle descriptors %s: %w", key, err)
		}
		if out == nil {
			out = &pb.SubmitTaskRequest{JobId: req.JobId, JobMasterId: req.JobMasterId, Tdd: proto.CloneOf(req.Tdd)}
		}
		out.Tdd.InputGates[i].ShuffleDescriptors = &pb.InputGateDeploymentDescriptor_Inline{Inline: &list}
	}
	if out == nil {
		return req, nil
	}
	return out, nil
}
