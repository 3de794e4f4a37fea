package taskmanager

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gofl/gofl/internal/blob"
	"github.com/gofl/gofl/internal/mailbox"
	"github.com/gofl/gofl/jobmanager/failover"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/taskmanager/runner"
)

// runnerPool keeps one job runner process per job: the job binary, fetched
// from the JobManager's BlobService into a local verified cache (Flink's
// library cache), started on first use. It is safe for concurrent use; task
// goroutines call get, the mailbox asks for stop.
type runnerPool struct {
	dir   string
	cache *blob.Cache
	dial  func(addr string) (*grpc.ClientConn, error)
	log   zerolog.Logger
	grace time.Duration
	// metricsInterval is how often runners sample their tasks' metrics.
	metricsInterval time.Duration
	// env is added to every runner's environment (Config.RunnerEnv).
	env []string

	mu    sync.Mutex
	procs map[string]*runnerEntry
	blobs map[string][]byte // offloaded shuffle descriptors by key
}

type runnerEntry struct {
	ready chan struct{}
	proc  *runner.Process
	err   error
}

func newRunnerPool(dir string, dial func(string) (*grpc.ClientConn, error), grace time.Duration, log zerolog.Logger) (*runnerPool, error) {
	store, err := blob.Open(filepath.Join(dir, "blobs"))
	if err != nil {
		return nil, err
	}
	return &runnerPool{dir: dir, cache: blob.NewCache(store), dial: dial, grace: grace, log: log, procs: map[string]*runnerEntry{}, blobs: map[string][]byte{}}, nil
}

// get returns the job's runner, starting it if needed. It blocks while the
// binary is fetched and the runner starts; concurrent callers share one start.
func (p *runnerPool) get(ctx context.Context, jobID, jobMasterAddress string, info *pb.JobInformation, data *net.TCPListener, dataAddr string) (*runner.Process, error) {
	for attempt := 0; ; attempt++ {
		p.mu.Lock()
		e := p.procs[jobID]
		if e == nil {
			e = &runnerEntry{ready: make(chan struct{})}
			p.procs[jobID] = e
			p.mu.Unlock()
			e.proc, e.err = p.start(ctx, jobID, jobMasterAddress, info, data, dataAddr)
			close(e.ready)
		} else {
			p.mu.Unlock()
			select {
			case <-e.ready:
			case <-ctx.Done():
				return nil, ctx.Err()
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
		if alive {
			return e.proc, nil
		}
		p.mu.Lock()
		if p.procs[jobID] == e {
			delete(p.procs, jobID) // a failed or dead runner is started afresh
		}
		p.mu.Unlock()
		if e.err == nil {
			// The dead runner's connection and watchers outlive its
			// process until stopped (Stop is idempotent, and quick now).
			e.proc.Stop(p.grace)
		}
		if e.err != nil || attempt > 0 {
			if e.err != nil {
				return nil, e.err
			}
			return nil, e.proc.Err()
		}
	}
}

func (p *runnerPool) start(ctx context.Context, jobID, jobMasterAddress string, info *pb.JobInformation, data *net.TCPListener, dataAddr string) (*runner.Process, error) {
	key := info.JobBinaryKey
	path, err := p.fetchBinary(ctx, jobMasterAddress, key)
	if err != nil {
		return nil, err
	}
	env := append([]string(nil), p.env...)
	if par := info.Config["parallelism.default"]; par != "" {
		env = append(env, runner.EnvParallelism+"="+par)
	}
	proc, err := runner.Start(ctx, runner.Spec{JobID: jobID, Binary: path, Args: info.ProgramArgs, Fingerprint: info.Fingerprint,
		Dir: filepath.Join(p.dir, "jobs", jobID), DataListener: data, DataAddress: dataAddr, Env: env, MetricsInterval: p.metricsInterval}, p.log)
	if err != nil {
		if status.Code(errors.Unwrap(err)) == codes.FailedPrecondition || errors.Is(err, runner.ErrFingerprintMismatch) {
			// A protocol or graph mismatch does not go away by retrying.
			return nil, failover.NonRecoverable(err)
		}
		return nil, failover.EnvironmentError(err)
	}
	return proc, nil
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
	fetchCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	path, err := p.cache.Get(fetchCtx, key, fetch)
	switch {
	case errors.Is(err, blob.ErrDigestMismatch), errors.Is(err, blob.ErrInvalidKey), status.Code(errors.Unwrap(err)) == codes.NotFound:
		return "", failover.NonRecoverable(fmt.Errorf("job binary %s: %w", key, err))
	case err != nil:
		return "", failover.EnvironmentError(fmt.Errorf("job binary %s: %w", key, err))
	}
	if err := os.Chmod(path, 0o755); err != nil {
		return "", failover.EnvironmentError(fmt.Errorf("job binary %s: %w", key, err))
	}
	return path, nil
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

// close stops the binary downloads in flight and waits for them to end.
func (p *runnerPool) close() { p.cache.Close() }

// running returns the job's runner if it is up, without starting one.
func (p *runnerPool) running(jobID string) *runner.Process {
	p.mu.Lock()
	e := p.procs[jobID]
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

// stop ends the job's runner, if any. It blocks until the process is gone.
func (p *runnerPool) stop(jobID string) {
	p.mu.Lock()
	e := p.procs[jobID]
	delete(p.procs, jobID)
	p.mu.Unlock()
	if e == nil {
		return
	}
	<-e.ready
	if e.proc != nil {
		e.proc.Stop(p.grace)
	}
}

func (p *runnerPool) stopAll() {
	p.mu.Lock()
	var jobs []string
	for j := range p.procs {
		jobs = append(jobs, j)
	}
	p.mu.Unlock()
	for _, j := range jobs {
		p.stop(j)
	}
}

// startRemoteTask runs a task in the job's runner: the task goroutine
// forwards the deployment, relays the runner's state reports and forwards a
// cancellation, so the TaskExecutor's bookkeeping is the same as for
// built-in tasks.
func (te *TaskExecutor) startRemoteTask(ctx context.Context, t *task, req *pb.SubmitTaskRequest, jc *jobConnection) {
	jobMasterAddress, jmClient, data, dataAddr := jc.address, jc.client, jc.dataLis, jc.dataAddr
	report := func(state string) {
		te.mb.Post(func() {
			te.enqueueReport(&pb.UpdateTaskExecutionStateRequest{JobId: t.jobID, Attempt: t.attempt, State: state})
		})
	}
	// run returns the task's final I/O metrics and accumulator results, as
	// the runner reported them with the terminal state.
	run := func(context.Context) (*pb.RunnerTaskState, error) {
		req, err := te.resolveOffloaded(ctx, jmClient, req)
		if err != nil {
			return nil, failover.EnvironmentError(err)
		}
		proc, err := te.runners.get(ctx, t.jobID, jobMasterAddress, req.Tdd.JobInformation, data, dataAddr)
		if err != nil {
			return nil, err
		}
		states := proc.Watch(t.attempt)
		defer proc.Unwatch(t.attempt)
		submitCtx, cancel := context.WithTimeout(ctx, te.cfg.RPCTimeout)
		err = proc.Submit(submitCtx, req)
		cancel()
		if err != nil {
			return nil, failover.EnvironmentError(fmt.Errorf("submitting to the job runner: %w", err))
		}
		last := func() *pb.RunnerTaskState { return &pb.RunnerTaskState{Metrics: proc.Metrics(t.attempt)} }
		done := ctx.Done()
		var confirm <-chan time.Time
		for {
			select {
			case st := <-states:
				switch st.State {
				case StateInitializing, StateRunning:
					report(st.State)
				case StateFinished:
					return st, nil
				case StateCanceled:
					return st, context.Canceled
				case StateFailed:
					return st, failover.Decode(st.Failure)
				}
			case <-done:
				done = nil
				cctx, cancel := context.WithTimeout(context.Background(), te.cfg.RPCTimeout)
				_ = proc.Cancel(cctx, t.jobID, t.attempt)
				cancel()
				confirm = time.After(te.cfg.RPCTimeout)
			case <-confirm:
				return last(), fmt.Errorf("the job runner did not confirm the cancellation within %v", te.cfg.RPCTimeout)
			case <-proc.Exited():
				return last(), failover.EnvironmentError(proc.Err())
			}
		}
	}
	mailbox.Go(te.mb, run, func(final *pb.RunnerTaskState, err error) { te.taskEnded(t, err, final) })
}

// resolveOffloaded replaces offloaded shuffle descriptors by their inline
// form, fetched from the JobMaster (as Flink's TaskExecutor loads offloaded
// TDD data before it creates the task), so the runner needs no connection
// to the JobManager. req is not modified.
func (te *TaskExecutor) resolveOffloaded(ctx context.Context, client pb.JobMasterServiceClient, req *pb.SubmitTaskRequest) (*pb.SubmitTaskRequest, error) {
	var out *pb.SubmitTaskRequest
	for i, g := range req.Tdd.GetInputGates() {
		key := g.GetOffloadedBlobKey()
		if key == "" {
			continue
		}
		fctx, cancel := context.WithTimeout(ctx, te.cfg.RPCTimeout)
		data, err := te.runners.blob(fctx, client, req.JobId, key)
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
