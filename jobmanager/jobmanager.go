package jobmanager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/historyserver"
	"github.com/gofl/gofl/internal/blob"
	"github.com/gofl/gofl/internal/ids"
	"github.com/gofl/gofl/internal/tlsconf"
	"github.com/gofl/gofl/internal/version"
	"github.com/gofl/gofl/jobmanager/dispatcher"
	"github.com/gofl/gofl/jobmanager/jobmaster"
	"github.com/gofl/gofl/jobmanager/rest"
	"github.com/gofl/gofl/providers"
	"github.com/gofl/gofl/resourcemanager"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/rpc/restapi"
	"github.com/gofl/gofl/storage"
)

// JobManager is a running JobManager process's parts.
type JobManager struct {
	// RPCAddress is where TaskManagers reach the ResourceManager and the
	// JobMasters; RESTAddress serves the REST API.
	RPCAddress  string
	RESTAddress string

	cancel context.CancelFunc
	ctx    context.Context
	wg     sync.WaitGroup
	errMu  sync.Mutex
	err    error
}

// Start binds the RPC and REST ports and starts serving. The JobManager
// runs until ctx ends or Stop is called.
// With high-availability.type other than none the process campaigns for
// leadership first and runs them only while it leads (startHA).
func Start(ctx context.Context, c *conf.Configuration, log zerolog.Logger) (*JobManager, error) {
	if ha := conf.HighAvailability(c); ha != "" && !strings.EqualFold(ha, conf.HighAvailabilityNone) {
		return startHA(ctx, c, log)
	}
	rpcLis, err := net.Listen("tcp", net.JoinHostPort(conf.JobManagerRPCAddress.Get(c), strconv.Itoa(conf.JobManagerRPCPort.Get(c))))
	if err != nil {
		return nil, fmt.Errorf("jobmanager: RPC port (jobmanager.rpc.address/jobmanager.rpc.port): %w", err)
	}
	restLis, err := net.Listen("tcp", net.JoinHostPort(conf.RestAddress.Get(c), strconv.Itoa(conf.RestPort.Get(c))))
	if err != nil {
		rpcLis.Close()
		return nil, fmt.Errorf("jobmanager: REST port (rest.address/rest.port): %w", err)
	}
	restToken, err := conf.RestToken(c)
	if err != nil {
		rpcLis.Close()
		restLis.Close()
		return nil, fmt.Errorf("jobmanager: %w", err)
	}
	internalTLS, restLis, err := loadTLS(ctx, c, restLis)
	if err != nil {
		rpcLis.Close()
		restLis.Close()
		return nil, err
	}
	blobDir, tempBlobs := conf.BlobStorageDirectory.Get(c), false
	if blobDir == "" {
		if blobDir, err = os.MkdirTemp("", "gofl-blobs-"); err != nil {
			rpcLis.Close()
			restLis.Close()
			return nil, fmt.Errorf("jobmanager: blob store: %w", err)
		}
		tempBlobs = true
	}
	blobs, err := blob.Open(blobDir)
	if err != nil {
		rpcLis.Close()
		restLis.Close()
		return nil, fmt.Errorf("jobmanager: blob store (blob.storage.directory): %w", err)
	}
	blobs.SetMaxTotalSize(int64(conf.BlobUploadMaxTotalSize.Get(c)))
	// Per-job and application clusters load their staged artifacts first:
	// a missing or corrupt one fails the start, and nothing runs. The job
	// binary's check (a read of tens of MB) runs below, while the
	// TaskManagers start.
	var dep *deployment
	if conf.DeploymentMode.Get(c) != conf.ModeSession {
		if dep, err = prepareDeployment(ctx, c, log); err != nil {
			rpcLis.Close()
			restLis.Close()
			if tempBlobs {
				_ = os.RemoveAll(blobDir)
			}
			return nil, err
		}
	}
	// A session cluster's delegation tokens, before its TaskManagers start.
	tokens, err := loadSessionTokens(ctx, c, log)
	if err != nil {
		rpcLis.Close()
		restLis.Close()
		if tempBlobs {
			_ = os.RemoveAll(blobDir)
		}
		return nil, err
	}
	if dep != nil {
		tokens = dep.tokens
	}
	// The provider's worker half makes the ResourceManager active (none for standalone).
	workers, err := providers.NewWorkerDriver(conf.DeploymentProvider.Get(c), providers.DriverContext{
		Config: c, JobManagerRPCAddress: rpcLis.Addr().String(), Log: log.With().Str("component", "workers").Logger()})
	if err != nil {
		rpcLis.Close()
		restLis.Close()
		if tempBlobs {
			_ = os.RemoveAll(blobDir)
		}
		tokens.remove()
		if dep != nil {
			dep.removeStaging()
			dep.staging.Close()
		}
		return nil, fmt.Errorf("jobmanager: provider (deployment.provider): %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	j := &JobManager{RPCAddress: rpcLis.Addr().String(), RESTAddress: restLis.Addr().String(), cancel: cancel, ctx: ctx}

	uploads := blob.NewUploads(blobs, nil, conf.BlobUploadCleanupGrace.Get(c))
	lead := newLeading(c, j.RPCAddress, internalTLS, workers, blobs, uploads, nil, tokens, dep.initialSlots(), log)
	rm, disp, grpcServer := lead.rm, lead.disp, lead.grpc
	handler := lead.rest
	var trusted func(*http.Request) bool
	if dep != nil {
		handler = dep.handler(handler)
		trusted = dep.isDriver
	}
	handler = withDashboard(rest.Authenticate(restToken, handler, trusted))
	httpServer := newRESTServer(handler)

	j.run(func() { rm.Run(ctx) })
	j.run(func() { disp.Run(ctx) })
	j.run(func() { uploads.Run(ctx, sweepInterval(conf.BlobUploadCleanupGrace.Get(c)), jobLive(disp)) })
	j.startMetrics(ctx, c, func() rest.Dispatcher { return disp }, log.With().Str("component", "metrics").Logger())
	j.run(func() {
		if err := grpcServer.Serve(rpcLis); err != nil {
			j.fail(fmt.Errorf("jobmanager: RPC server: %w", err))
		}
	})
	j.run(func() {
		if err := httpServer.Serve(restLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			j.fail(fmt.Errorf("jobmanager: REST server: %w", err))
		}
	})
	j.run(func() {
		<-ctx.Done()
		shutdown, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		_ = httpServer.Shutdown(shutdown)
		stopped := make(chan struct{})
		go func() { grpcServer.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-shutdown.Done():
			grpcServer.Stop()
			<-stopped
		}
		if tempBlobs {
			_ = os.RemoveAll(blobDir)
		}
		tokens.remove()
		if dep != nil {
			// A per-job or application cluster's staging goes with it.
			dep.removeStaging()
			dep.staging.Close()
		}
	})
	j.run(func() { tokens.renew(ctx) })
	if dep != nil {
		// The TaskManagers for the job's first slots are starting
		// (initialSlots) while the binary is checked; a corrupt one still
		// fails the start, and the shutdown above stops them and removes
		// the staging.
		if err := dep.loadBinary(ctx, blobs); err != nil {
			j.fail(err)
			_ = j.Wait()
			return nil, err
		}
		j.run(func() {
			err := dep.run(ctx, disp, driverRESTAddress(j.RESTAddress))
			if workers != nil && ctx.Err() == nil {
				// Stop the TaskManagers while this JobManager still answers
				// them, so they disconnect at once instead of waiting out
				// their RPC timeouts. Close is idempotent; the
				// ResourceManager's own Close then returns at once.
				stopCtx, done := context.WithTimeout(context.Background(), 30*time.Second)
				_ = workers.Close(stopCtx)
				done()
			}
			if err != nil {
				j.fail(fmt.Errorf("jobmanager: %s cluster %s: %w", dep.mode, dep.clusterID, err))
			}
			j.cancel()
		})
	}
	log.Info().Str("rpc", j.RPCAddress).Str("rest", j.RESTAddress).Str("version", version.Version).Msg("JobManager started")
	return j, nil
}

func (j *JobManager) run(f func()) {
	j.wg.Add(1)
	go func() { defer j.wg.Done(); f() }()
}

func (j *JobManager) fail(err error) {
	j.errMu.Lock()
	if j.err == nil {
		j.err = err
	}
	j.errMu.Unlock()
	j.cancel()
}

// Done is closed once the JobManager is shutting down: stopped, failed,
// or, for a per-job or application cluster, its work ended.
func (j *JobManager) Done() <-chan struct{} { return j.ctx.Done() }

// Stop shuts the JobManager down and waits for it.
func (j *JobManager) Stop() error {
	j.cancel()
	return j.Wait()
}

// Wait blocks until the JobManager stopped and returns why, if it failed.
func (j *JobManager) Wait() error {
	j.wg.Wait()
	j.errMu.Lock()
	defer j.errMu.Unlock()
	return j.err
}

// sweepInterval is how often unreferenced uploads are looked for: a
// quarter of the grace period, between 1 s and 1 min.
func sweepInterval(grace time.Duration) time.Duration {
	return min(max(grace/4, time.Second), time.Minute)
}

// jobLive answers whether a job has not reached a globally terminal state;
// a job the Dispatcher no longer knows is not live.
func jobLive(disp *dispatcher.Dispatcher) func(ctx context.Context, jobID string) (bool, error) {
	return func(ctx context.Context, jobID string) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		det, err := disp.JobDetails(ctx, jobID)
		if errors.Is(err, restapi.ErrJobNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		switch det.State {
		case "FINISHED", "FAILED", "CANCELED":
			return false, nil
		}
		return true, nil
	}
}

// leading is what a leading JobManager runs: a ResourceManager, a
// Dispatcher, their RPC server and the REST handler, built the same way
// with and without high availability (dispHA nil: none).
type leading struct {
	rm   *resourcemanager.ResourceManager
	disp *dispatcher.Dispatcher
	grpc *grpc.Server
	rest http.Handler
}

// initialSlots is ActiveConfig.InitialSlots (0: none).
func newLeading(c *conf.Configuration, address string, internalTLS *tls.Config, workers providers.WorkerDriver, blobs *blob.Store, uploads *blob.Uploads,
	dispHA *dispatcher.HA, tokens *clusterTokens, initialSlots int, log zerolog.Logger) leading {
	// Internal TLS: TaskManagers must present the cluster's certificate to
	// this server, and the JobMasters and the ResourceManager present it
	// to theirs.
	creds := tlsconf.ClientCredentials(internalTLS)
	dialTM := func(addr string) (pb.TaskExecutorServiceClient, io.Closer, error) {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			return nil, nil, err
		}
		return pb.NewTaskExecutorServiceClient(conn), conn, nil
	}
	active := resourcemanager.ActiveConfigFromConf(c)
	active.InitialSlots = initialSlots
	rm := resourcemanager.New(resourcemanager.Config{
		DialTaskExecutor:   dialTM,
		HeartbeatInterval:  conf.HeartbeatInterval.Get(c),
		HeartbeatTimeout:   conf.HeartbeatTimeout.Get(c),
		SlotRequestTimeout: conf.SlotRequestTimeout.Get(c),
		EvenlySpreadOut:    conf.EvenlySpreadOutSlots.Get(c),
		Workers:            workers,
		Active:             active,
		DelegationTokens:   tokens.forTaskManagers,
	}, log.With().Str("component", "resourcemanager").Logger())
	tokens.lead(rm)
	// The history server's archive needs the REST handler, built after the
	// Dispatcher; no job ends before Run.
	var archiver *historyserver.Archiver
	var onTerminal func(string)
	if dir := conf.ExpandEnv(conf.JobManagerArchiveDir.Get(c)); dir != "" {
		onTerminal = func(jobID string) { archiveJob(archiver, jobID, log) }
	}
	// A session job's own delegation tokens: staged at submission, renewed
	// while it runs, cancelled when it ends.
	jt := newJobTokens(c, log)
	if jt != nil {
		archive := onTerminal
		onTerminal = func(jobID string) {
			if archive != nil {
				archive(jobID)
			}
			jt.cancel(jobID)
		}
	}
	disp := dispatcher.New(dispatcher.Config{Cluster: c, Address: address, Version: version.Version,
		MaxArchivedJobs: conf.JobStoreMaxCapacity.Get(c), ResultCacheBytes: int64(conf.JobStoreCacheSize.Get(c)), HA: dispHA,
		OnGloballyTerminal: onTerminal, PrepareJob: jt.prepare, WhileRunning: jt.renew,
		JobMasterOptions: func(jc *jobmaster.Config) { jc.DialTaskManager = dialTM }},
		rm, log.With().Str("component", "dispatcher").Logger())
	// Identifiers in every request are checked before any handler runs.
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(64<<20), grpc.Creds(tlsconf.ServerCredentials(internalTLS, log.With().Str("component", "rpc").Logger())),
		grpc.ChainUnaryInterceptor(ids.UnaryServerInterceptor()))
	pb.RegisterResourceManagerServiceServer(srv, rm.Service())
	pb.RegisterJobMasterServiceServer(srv, disp.JobMasterService())
	pb.RegisterBlobServiceServer(srv, blob.NewService(blobs))
	h := rest.NewHandler(disp, log.With().Str("component", "rest").Logger(), rest.Options{Blobs: blobs, Uploads: uploads,
		DisableSubmit: !conf.WebSubmitEnabled(c), DisableCancel: !conf.WebCancelEnable.Get(c), Logs: newLogFiles(disp, creds),
		Version: version.Version, Config: configEntries(c)})
	if conf.ExpandEnv(conf.JobManagerArchiveDir.Get(c)) != "" {
		archiver = historyserver.NewArchiver(conf.ExpandEnv(conf.JobManagerArchiveDir.Get(c)), storage.OptionsFromConf(c), h,
			log.With().Str("component", "archiver").Logger())
	}
	return leading{rm: rm, disp: disp, grpc: srv, rest: h}
}

// loadTLS loads the internal TLS configuration (nil: off) and wraps the
// REST listener in TLS when security.ssl.rest.enabled is on. Certificate
// files may be staged URIs: the client stages the per-cluster CA's.
func loadTLS(ctx context.Context, c *conf.Configuration, restLis net.Listener) (*tls.Config, net.Listener, error) {
	read := tlsconf.ReadStorage(storage.OptionsFromConf(c))
	m, err := tlsconf.Internal(ctx, c, read)
	if err != nil {
		return nil, restLis, fmt.Errorf("jobmanager: %w", err)
	}
	var internal *tls.Config
	if m != nil {
		if internal, err = m.Config(); err != nil {
			return nil, restLis, fmt.Errorf("jobmanager: internal TLS: %w", err)
		}
	}
	restTLS, err := tlsconf.RESTServer(ctx, c, read)
	if err != nil {
		return nil, restLis, fmt.Errorf("jobmanager: %w", err)
	}
	if restTLS != nil {
		restLis = tls.NewListener(restLis, restTLS)
	}
	return internal, restLis, nil
}
