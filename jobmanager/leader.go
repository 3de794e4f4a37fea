package jobmanager

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/ha"
	"github.com/gofl/gofl/internal/blob"
	"github.com/gofl/gofl/internal/version"
	"github.com/gofl/gofl/jobmanager/dispatcher"
	"github.com/gofl/gofl/jobmanager/rest"
	"github.com/gofl/gofl/providers"
)

// startHA starts a JobManager process that campaigns for leadership
// (high-availability.type other than none). It serves REST and RPC at
// once, but only the leader runs a Dispatcher, a ResourceManager and
// JobMasters, built afresh for every grant with the leader session as
// fencing token; a standby answers REST with the leader's address and
// refuses RPC connections. On revocation the leader stops its JobMasters
// without touching the jobs' recovery data (they are suspended, as in
// Flink), stops its ResourceManager (and the TaskManagers it started), and
// campaigns again; the next leader recovers the jobs.
func startHA(ctx context.Context, c *conf.Configuration, log zerolog.Logger) (*JobManager, error) {
	haCfg := ha.ConfigFromConf(c, log.With().Str("component", "ha").Logger())
	services, err := ha.New(ctx, haCfg)
	if err != nil {
		return nil, fmt.Errorf("jobmanager: high availability (high-availability.type %s, quorum %q): %w", haCfg.Type, haCfg.Quorum, err)
	}
	fail := func(err error, closers ...func() error) (*JobManager, error) {
		for _, c := range closers {
			_ = c()
		}
		_ = services.Close()
		return nil, err
	}
	rpcLis, err := net.Listen("tcp", net.JoinHostPort(conf.JobManagerRPCAddress.Get(c), strconv.Itoa(conf.JobManagerRPCPort.Get(c))))
	if err != nil {
		return fail(fmt.Errorf("jobmanager: RPC port (jobmanager.rpc.address/jobmanager.rpc.port): %w", err))
	}
	restLis, err := net.Listen("tcp", net.JoinHostPort(conf.RestAddress.Get(c), strconv.Itoa(conf.RestPort.Get(c))))
	if err != nil {
		return fail(fmt.Errorf("jobmanager: REST port (rest.address/rest.port): %w", err), rpcLis.Close)
	}
	blobDir, tempBlobs := conf.BlobStorageDirectory.Get(c), false
	if blobDir == "" {
		if blobDir, err = os.MkdirTemp("", "gofl-blobs-"); err != nil {
			return fail(fmt.Errorf("jobmanager: blob store: %w", err), rpcLis.Close, restLis.Close)
		}
		tempBlobs = true
	}
	blobs, err := blob.Open(blobDir)
	if err != nil {
		return fail(fmt.Errorf("jobmanager: blob store (blob.storage.directory): %w", err), rpcLis.Close, restLis.Close)
	}
	restToken, err := conf.RestToken(c)
	if err != nil {
		return fail(fmt.Errorf("jobmanager: %w", err), rpcLis.Close, restLis.Close)
	}
	internalTLS, restLis, err := loadTLS(ctx, c, restLis)
	if err != nil {
		return fail(err, rpcLis.Close, restLis.Close)
	}
	// A per-job or application cluster loads its staged job first, at
	// every start: a restarted JobManager (the provider's next attempt)
	// finds the job in the HA stores and recovers it instead of submitting
	// it again; an application's driver runs again and attaches to its
	// jobs, whose IDs are fixed (jobgraph.ApplicationJobID).
	var dep *deployment
	if mode := conf.DeploymentMode.Get(c); mode == conf.ModePerJob || mode == conf.ModeApplication {
		if dep, err = prepareDeployment(ctx, c, log); err != nil {
			return fail(err, rpcLis.Close, restLis.Close)
		}
		if err = dep.loadBinary(ctx, blobs); err != nil {
			dep.discard()
			return fail(err, rpcLis.Close, restLis.Close)
		}
		if mode == conf.ModeApplication {
			dep.appID = haCfg.ClusterID
		}
	}
	// Delegation tokens: every JobManager of the cluster, leader or
	// standby, loads the staged ones (a recovered leader finds them there)
	// and renews them, so none lapses across a failover.
	tokens, err := loadSessionTokens(ctx, c, log)
	if err != nil {
		return fail(err, rpcLis.Close, restLis.Close)
	}
	if dep != nil {
		tokens = dep.tokens
	}
	removeTokens := func() error { tokens.remove(); return nil }
	ctx, cancel := context.WithCancel(ctx)
	j := &JobManager{RPCAddress: rpcLis.Addr().String(), RESTAddress: restLis.Addr().String(), cancel: cancel, ctx: ctx}
	p := &leaderProcess{j: j, c: c, log: log, restToken: restToken, internalTLS: internalTLS, services: services, blobs: blobs, rpc: rpcLis,
		dep: dep, tokens: tokens, events: make(chan leaderEvent, 16)}
	httpServer := newRESTServer(p)

	// The standby answers REST with the leader's address.
	restRetriever, err := services.LeaderRetriever(ha.RestServerComponent, p)
	if err != nil {
		cancel()
		return fail(fmt.Errorf("jobmanager: following the REST leader: %w", err), rpcLis.Close, restLis.Close, removeTokens)
	}
	// One contender drives the process; the ResourceManager's and REST
	// server's elections only publish their addresses (the process leads
	// all its components at once).
	var elections []componentElection
	for _, comp := range []string{ha.ResourceManagerComponent, ha.RestServerComponent, ha.DispatcherComponent} {
		var contender ha.LeaderContender = passiveContender{p}
		if comp == ha.DispatcherComponent {
			contender = p
		}
		e, err := services.LeaderElection(comp, contender)
		if err != nil {
			cancel()
			for _, e := range elections {
				_ = e.Close()
			}
			return fail(fmt.Errorf("jobmanager: leader election of %s: %w", comp, err), restRetriever.Close, rpcLis.Close, restLis.Close, removeTokens)
		}
		elections = append(elections, componentElection{e, comp})
	}
	p.elections = elections

	j.run(func() { p.acceptRPC() })
	j.startMetrics(ctx, c, func() rest.Dispatcher {
		if t := p.current(); t != nil && t.disp != nil {
			return t.disp
		}
		return nil
	}, log.With().Str("component", "metrics").Logger())
	j.run(func() {
		if err := httpServer.Serve(restLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			j.fail(fmt.Errorf("jobmanager: REST server: %w", err))
		}
	})
	j.run(func() {
		p.loop(ctx)
		// Withdraw first, so a standby takes over at once.
		for _, e := range elections {
			_ = e.Close()
		}
		_ = restRetriever.Close()
		_ = services.Close()
		shutdown, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		_ = httpServer.Shutdown(shutdown)
		_ = rpcLis.Close()
		if tempBlobs {
			_ = os.RemoveAll(blobDir)
		}
		tokens.remove()
		if dep != nil {
			// Its staging stays unless the work ended (removed then):
			// the provider's next attempt needs it.
			dep.staging.Close()
		}
	})
	j.run(func() { tokens.renew(ctx) })
	log.Info().Str("rpc", j.RPCAddress).Str("rest", j.RESTAddress).Str("version", version.Version).
		Str("high_availability", haCfg.Type).Str("cluster_id", haCfg.ClusterID).Msg("JobManager started; campaigning for leadership")
	return j, nil
}

// componentElection is the election handle of one component.
type componentElection struct {
	ha.LeaderElection
	component string
}

// leaderEvent is a grant (granted set) or a revocation.
type leaderEvent struct {
	session ha.SessionID
	granted bool
}

// leaderProcess is the leader-driven part of an HA JobManager process. Its
// loop goroutine (owned by the JobManager) starts and stops terms; the
// REST server and the RPC acceptor read the current term.
type leaderProcess struct {
	j   *JobManager
	c   *conf.Configuration
	log zerolog.Logger
	// restToken is rest.authentication.token (or its file): REST asks for it.
	restToken string
	// internalTLS is the internal mutual TLS configuration; nil: off.
	internalTLS *tls.Config
	services    ha.Services
	blobs       *blob.Store
	rpc         net.Listener
	// dep is a per-job cluster's work; nil for a session.
	dep *deployment
	// tokens are the cluster's delegation tokens (nil: none); each term's
	// ResourceManager sends them to the TaskManagers.
	tokens    *clusterTokens
	elections []componentElection
	events    chan leaderEvent

	mu sync.Mutex
	// cur is the term this process leads; nil while standby.
	cur *term
	// restLeader is the REST leader the retriever last reported.
	restLeader ha.LeaderInformation
}

// GrantLeadership implements ha.LeaderContender.
func (p *leaderProcess) GrantLeadership(session ha.SessionID) {
	p.post(leaderEvent{session: session, granted: true})
}

// RevokeLeadership implements ha.LeaderContender.
func (p *leaderProcess) RevokeLeadership() { p.post(leaderEvent{}) }

// HandleError implements ha.LeaderContender and ha.LeaderRetrievalListener.
func (p *leaderProcess) HandleError(err error) {
	p.j.fail(fmt.Errorf("jobmanager: high availability: %w", err))
}

// NotifyLeaderAddress implements ha.LeaderRetrievalListener (the REST leader).
func (p *leaderProcess) NotifyLeaderAddress(info ha.LeaderInformation) {
	p.mu.Lock()
	p.restLeader = info
	p.mu.Unlock()
}

func (p *leaderProcess) post(ev leaderEvent) {
	select {
	case p.events <- ev:
	case <-p.j.ctx.Done():
	}
}

// passiveContender is the contender of the components that follow the
// process's leadership without acting on it.
type passiveContender struct{ p *leaderProcess }

func (passiveContender) GrantLeadership(ha.SessionID) {}
func (passiveContender) RevokeLeadership()            {}
func (c passiveContender) HandleError(err error)      { c.p.HandleError(err) }

// loop applies grants and revocations in order until ctx ends, then stops
// the term it leads.
func (p *leaderProcess) loop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			p.stopTerm("the JobManager stops")
			return
		case ev := <-p.events:
			if !ev.granted {
				p.stopTerm("leadership revoked")
				continue
			}
			p.stopTerm("a new leadership")
			if err := p.startTerm(ctx, ev.session); err != nil {
				p.j.fail(err)
			}
		}
	}
}

// term is one leadership of this process: its Dispatcher, ResourceManager
// and RPC server.
type term struct {
	session ha.SessionID
	disp    *dispatcher.Dispatcher
	handler http.Handler
	grpc    *grpc.Server
	lis     *termListener
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	started time.Time
}

func (p *leaderProcess) startTerm(ctx context.Context, session ha.SessionID) error {
	c, log := p.c, p.log.With().Stringer("leader_session", session).Logger()
	workers, err := providers.NewWorkerDriver(conf.DeploymentProvider.Get(c), providers.DriverContext{
		Config: c, JobManagerRPCAddress: p.j.RPCAddress, Log: log.With().Str("component", "workers").Logger()})
	if err != nil {
		return fmt.Errorf("jobmanager: provider (deployment.provider): %w", err)
	}
	tctx, cancel := context.WithCancel(ctx)
	t := &term{session: session, cancel: cancel, lis: newTermListener(p.rpc.Addr()), started: time.Now()}
	lead := newLeading(c, p.j.RPCAddress, p.internalTLS, workers, p.blobs, nil, &dispatcher.HA{Services: p.services, Session: session}, p.tokens, 0, log)
	rm, disp := lead.rm, lead.disp
	t.grpc, t.disp = lead.grpc, disp
	t.handler = withDashboard(rest.Authenticate(p.restToken, lead.rest, nil))
	if p.dep != nil {
		t.handler = withDashboard(rest.Authenticate(p.restToken, p.dep.handler(lead.rest), p.dep.isDriver))
	}
	t.wg.Add(3)
	go func() { defer t.wg.Done(); rm.Run(tctx) }()
	go func() { defer t.wg.Done(); disp.Run(tctx) }()
	go func() { defer t.wg.Done(); _ = t.grpc.Serve(t.lis) }()
	p.mu.Lock()
	p.cur = t
	p.mu.Unlock()

	recovered, err := disp.RecoverJobs(tctx)
	if err != nil {
		log.Error().Err(err).Msg("recovering jobs")
	}
	for _, e := range p.elections {
		addr := p.j.RPCAddress
		if e.component == ha.RestServerComponent {
			addr = p.j.RESTAddress
		}
		if err := e.ConfirmLeadership(tctx, session, addr); err != nil {
			// Revoked meanwhile: the revocation follows in the events.
			log.Warn().Err(err).Msg("confirming leadership")
			break
		}
	}
	log.Info().Strs("recovered_jobs", recovered).Dur("took", time.Since(t.started)).Msg("leading: Dispatcher and ResourceManager started")
	if p.dep != nil {
		t.wg.Add(1)
		go func() { defer t.wg.Done(); p.runDeployment(tctx, disp, workers) }()
	}
	return nil
}

// runDeployment does a per-job cluster's work while this term leads (the
// job, recovered or submitted) and ends the JobManager once it is over.
// A term that ends first leaves the job to the next leader.
func (p *leaderProcess) runDeployment(ctx context.Context, disp *dispatcher.Dispatcher, workers providers.WorkerDriver) {
	err := p.dep.run(ctx, disp, driverRESTAddress(p.j.RESTAddress))
	if ctx.Err() != nil {
		return
	}
	if workers != nil {
		// As without HA: stop the TaskManagers while they are answered.
		stopCtx, done := context.WithTimeout(context.Background(), 30*time.Second)
		_ = workers.Close(stopCtx)
		done()
	}
	p.dep.removeStaging()
	if err != nil {
		p.j.fail(fmt.Errorf("jobmanager: %s cluster %s: %w", p.dep.mode, p.dep.clusterID, err))
	}
	p.j.cancel()
}

// stopTerm ends the term this process leads, if any: no new RPC or REST
// call reaches it, its JobMasters stop (the jobs stay in the HA stores),
// its ResourceManager stops its TaskManagers.
func (p *leaderProcess) stopTerm(why string) {
	p.mu.Lock()
	t := p.cur
	p.cur = nil
	p.mu.Unlock()
	if t == nil {
		return
	}
	t.lis.Close()
	t.grpc.Stop()
	t.cancel()
	t.wg.Wait()
	p.log.Info().Stringer("leader_session", t.session).Str("reason", why).Msg("stopped leading: jobs suspended")
}

func (p *leaderProcess) current() *term {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

// acceptRPC hands RPC connections to the current term's server and closes
// them while this process does not lead: a standby refuses RPCs.
func (p *leaderProcess) acceptRPC() {
	for {
		conn, err := p.rpc.Accept()
		if err != nil {
			return
		}
		t := p.current()
		if t == nil || !t.lis.hand(conn) {
			conn.Close()
		}
	}
}

// ServeHTTP serves the REST API while leading; a standby answers
// 307 to the leader's REST address (clients that follow redirects reach
// it), or 503 while there is no leader.
func (p *leaderProcess) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if t := p.current(); t != nil {
		t.handler.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	leader := p.restLeader
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if leader.IsEmpty() || leader.Address == p.j.RESTAddress {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(map[string][]string{"errors": {
			"jobmanager: not the leader, and no leader is known yet (leader election in progress); retry"}})
		return
	}
	url := "http://" + leader.Address + r.URL.RequestURI()
	w.Header().Set("Location", url)
	w.WriteHeader(http.StatusTemporaryRedirect)
	_ = json.NewEncoder(w).Encode(map[string][]string{"errors": {
		fmt.Sprintf("jobmanager: not the leader; the leader is at http://%s", leader.Address)}})
}

// termListener is the net.Listener of one term's gRPC server: it gets the
// connections acceptRPC hands it until closed.
type termListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newTermListener(addr net.Addr) *termListener {
	return &termListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

// hand gives conn to the server; false once the listener is closed.
func (l *termListener) hand(conn net.Conn) bool {
	select {
	case l.conns <- conn:
		return true
	case <-l.done:
		return false
	}
}

func (l *termListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *termListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *termListener) Addr() net.Addr { return l.addr }
