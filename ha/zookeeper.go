package ha

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

	"github.com/gofl/gofl/storage"
)

// sessionState is this process's view of its ZooKeeper session.
type sessionState int

const (
	// stateConnected: the session is live and the connection up.
	stateConnected sessionState = iota
	// stateSuspended: the connection is lost; the session may still live
	// (Curator's SUSPENDED). Leaders are revoked at once.
	stateSuspended
	// stateExpired: the session is gone with its ephemeral nodes; the
	// client is establishing a new one (Curator's LOST).
	stateExpired
)

func (s sessionState) String() string {
	return [...]string{"connected", "suspended", "expired"}[s]
}

// zkServices are the `zookeeper` HA services. One ZooKeeper session per
// process (Flink: one CuratorFramework), shared by the election, every
// retriever and the stores.
type zkServices struct {
	cfg    Config
	log    zerolog.Logger
	conn   *zk.Conn
	base   string // Root/ClusterID
	fs     storage.FileSystem
	fsBase string // StorageDir/ClusterID, inside fs

	mu        sync.Mutex
	state     sessionState
	sessionID int64
	subs      map[chan struct{}]struct{}
	closing   bool // Close started: no new contenders or retrievers
	closed    bool // Close withdrew every contender: no more writes
	// election state (election.go), under mu.
	contenders map[string]*zkElection
	latch      string // our latch node, "" if none
	latchSess  int64  // the ZooKeeper session that created latch
	leading    bool
	leader     SessionID
	retrievers map[*zkRetriever]struct{}

	wake         chan struct{} // election loop
	quit         chan struct{}
	electionDone chan struct{}
	sessionDone  chan struct{}

	results *fsJobResultStore
	blobs   *fsBlobStore
}

// zkLogger routes the client's log lines to zerolog at debug level: the
// client logs every reconnect, which the services report themselves.
type zkLogger struct{ log zerolog.Logger }

func (l zkLogger) Printf(format string, args ...any) { l.log.Debug().Msgf(format, args...) }

func newZooKeeper(ctx context.Context, cfg Config) (Services, error) {
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 4 * time.Second
	}
	if cfg.ConnectionTimeout <= 0 {
		cfg.ConnectionTimeout = 15 * time.Second
	}
	var servers []string
	for _, s := range strings.Split(cfg.Quorum, ",") {
		if s = strings.TrimSpace(s); s != "" {
			servers = append(servers, s)
		}
	}
	if len(servers) == 0 {
		return nil, fmt.Errorf("%w: high-availability.zookeeper.quorum is empty", ErrInvalid)
	}
	if cfg.StorageDir == "" {
		return nil, fmt.Errorf("%w: high-availability.storageDir is not set", ErrInvalid)
	}
	log := cfg.Logger.With().Str("component", "ha").Str("quorum", cfg.Quorum).Logger()

	fsys, root, err := storage.Open(ctx, cfg.StorageDir, cfg.Storage)
	if err != nil {
		return nil, fmt.Errorf("ha: high-availability.storageDir %s: %w", cfg.StorageDir, err)
	}
	fsBase := path.Join(root, strings.Trim(cfg.ClusterID, "/"))
	if err := fsys.MkdirAll(ctx, fsBase); err != nil {
		fsys.Close()
		return nil, fmt.Errorf("ha: high-availability.storageDir %s is not usable: %w", cfg.StorageDir, err)
	}

	dialer := cfg.Dialer
	if dialer == nil {
		dialer = net.DialTimeout
	}
	conn, events, err := zk.Connect(servers, cfg.SessionTimeout,
		zk.WithLogger(zkLogger{log}), zk.WithLogInfo(false), zk.WithDialer(dialer))
	if err != nil {
		fsys.Close()
		return nil, fmt.Errorf("%w: %s: %v", ErrUnavailable, cfg.Quorum, err)
	}
	if err := awaitSession(ctx, events, cfg); err != nil {
		conn.Close()
		fsys.Close()
		return nil, err
	}
	s := &zkServices{
		cfg: cfg, log: log, conn: conn, fs: fsys, fsBase: fsBase,
		base:         clusterPath(cfg.Root, cfg.ClusterID),
		state:        stateConnected,
		sessionID:    conn.SessionID(),
		subs:         map[chan struct{}]struct{}{},
		contenders:   map[string]*zkElection{},
		retrievers:   map[*zkRetriever]struct{}{},
		wake:         make(chan struct{}, 1),
		quit:         make(chan struct{}),
		electionDone: make(chan struct{}),
		sessionDone:  make(chan struct{}),
	}
	s.results = &fsJobResultStore{s: s, dir: path.Join(fsBase, "job-result-store")}
	s.blobs = &fsBlobStore{fs: fsys, dir: path.Join(fsBase, "blob")}
	go s.sessionLoop(events)
	go s.electionLoop()
	log.Info().Str("znode", s.base).Str("storageDir", fsys.URI(fsBase)).Int64("session", s.sessionID).
		Dur("sessionTimeout", cfg.SessionTimeout).Msg("ha: connected to ZooKeeper")
	return s, nil
}

// awaitSession waits for the first session, at most ConnectionTimeout.
func awaitSession(ctx context.Context, events <-chan zk.Event, cfg Config) error {
	timer := time.NewTimer(cfg.ConnectionTimeout)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return fmt.Errorf("%w: connection to %s closed", ErrUnavailable, cfg.Quorum)
			}
			if ev.State == zk.StateHasSession {
				return nil
			}
			if ev.State == zk.StateAuthFailed {
				return fmt.Errorf("%w: %s: authentication failed", ErrUnavailable, cfg.Quorum)
			}
		case <-timer.C:
			return fmt.Errorf("%w: no session with ZooKeeper quorum %s within %s (high-availability.zookeeper.client.connection-timeout); is ZooKeeper running there?",
				ErrUnavailable, cfg.Quorum, cfg.ConnectionTimeout)
		case <-ctx.Done():
			return fmt.Errorf("%w: waiting for a session with %s: %w", ErrUnavailable, cfg.Quorum, ctx.Err())
		}
	}
}

// sessionLoop turns the client's session events into s.state and wakes
// everyone who watches it. It ends when the client is closed.
func (s *zkServices) sessionLoop(events <-chan zk.Event) {
	defer close(s.sessionDone)
	for ev := range events {
		if ev.Type != zk.EventSession {
			continue
		}
		s.mu.Lock()
		prev := s.state
		switch ev.State {
		case zk.StateHasSession:
			if id := s.conn.SessionID(); id != s.sessionID {
				s.sessionID = id
			}
			s.state = stateConnected
		case zk.StateDisconnected, zk.StateConnecting:
			if s.state == stateConnected {
				s.state = stateSuspended
			}
		case zk.StateExpired:
			s.state = stateExpired
		}
		cur, id := s.state, s.sessionID
		if cur != prev {
			s.notifyLocked()
		}
		s.mu.Unlock()
		if cur != prev {
			s.log.Info().Stringer("from", prev).Stringer("to", cur).Int64("session", id).Msg("ha: ZooKeeper session state changed")
		}
	}
}

// subscribe returns a channel that receives a signal after every session
// state change; unsubscribe with the returned func.
func (s *zkServices) subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.subs[ch] = struct{}{}
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		delete(s.subs, ch)
		s.mu.Unlock()
	}
}

func (s *zkServices) notifyLocked() {
	for ch := range s.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	s.wakeElection()
}

func (s *zkServices) wakeElection() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// connected reports whether the session is live.
func (s *zkServices) connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == stateConnected
}

// zkErr maps a client error to the package's sentinels.
func (s *zkServices) zkErr(op, p string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zk.ErrNoNode):
		return fmt.Errorf("%w: %s %s: %v", ErrNotFound, op, p, err)
	case errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrNoServer),
		errors.Is(err, zk.ErrSessionExpired), errors.Is(err, zk.ErrSessionMoved):
		return fmt.Errorf("%w: %s %s at %s: %v", ErrUnavailable, op, p, s.cfg.Quorum, err)
	case errors.Is(err, zk.ErrClosing):
		return fmt.Errorf("%w: %s %s: %v", ErrClosed, op, p, err)
	}
	return fmt.Errorf("ha: %s %s: %w", op, p, err)
}

// fence returns the check that makes a multi-op fail once this process's
// leadership for session is over: its latch node must still exist. Our
// latch can only vanish with our session (or our own withdrawal), and no
// node can sort before it later, so "granted and the latch exists" means
// "still the leader". ErrNotLeader if session is not the current grant.
func (s *zkServices) fence(session SessionID) (*zk.CheckVersionRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if !s.leading || s.leader != session || s.latch == "" {
		return nil, fmt.Errorf("%w: session %s is not this process's current leadership", ErrNotLeader, session)
	}
	return &zk.CheckVersionRequest{Path: s.latch, Version: -1}, nil
}

// fencedMulti runs ops atomically, together with the leadership check of
// session. A failed check is ErrNotLeader; another failed op returns its
// error (mapped by zkErr; zk.ErrNodeExists and zk.ErrBadVersion stay
// visible through errors.Is).
func (s *zkServices) fencedMulti(session SessionID, ops ...any) error {
	check, err := s.fence(session)
	if err != nil {
		return err
	}
	return s.multiChecked(check, ops...)
}

// multiChecked runs check and ops as one multi-op (see fencedMulti).
func (s *zkServices) multiChecked(check *zk.CheckVersionRequest, ops ...any) error {
	res, err := s.conn.Multi(append([]any{check}, ops...)...)
	if len(res) > 0 && errors.Is(res[0].Error, zk.ErrNoNode) {
		return fmt.Errorf("%w: latch node %s is gone (session lost)", ErrNotLeader, check.Path)
	}
	for i, r := range res {
		if i > 0 && r.Error != nil && !errors.Is(r.Error, zk.ErrAPIError) {
			return s.zkErr("multi", opPath(ops[i-1]), r.Error)
		}
	}
	if err != nil {
		return s.zkErr("multi", check.Path, err)
	}
	return nil
}

func opPath(op any) string {
	switch o := op.(type) {
	case *zk.CreateRequest:
		return o.Path
	case *zk.SetDataRequest:
		return o.Path
	case *zk.DeleteRequest:
		return o.Path
	case *zk.CheckVersionRequest:
		return o.Path
	}
	return "?"
}

// ensurePath creates p and its missing parents as persistent nodes.
// Containers are not fenced: an empty one is harmless.
func (s *zkServices) ensurePath(p string) error {
	if ok, _, err := s.conn.Exists(p); err == nil && ok {
		return nil
	}
	cur := ""
	for _, part := range strings.Split(strings.Trim(p, "/"), "/") {
		cur += "/" + part
		_, err := s.conn.Create(cur, nil, 0, zk.WorldACL(zk.PermAll))
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return s.zkErr("create", cur, err)
		}
	}
	return nil
}

func (s *zkServices) JobGraphStore() JobGraphStore   { return &zkJobGraphStore{s: s} }
func (s *zkServices) JobResultStore() JobResultStore { return s.results }
func (s *zkServices) BlobStore() BlobStore           { return s.blobs }

func (s *zkServices) Close() error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		<-s.sessionDone
		return nil
	}
	s.closing = true
	es := make([]*zkElection, 0, len(s.contenders))
	for _, e := range s.contenders {
		es = append(es, e)
	}
	rs := make([]*zkRetriever, 0, len(s.retrievers))
	for r := range s.retrievers {
		rs = append(rs, r)
	}
	s.mu.Unlock()
	for _, e := range es {
		_ = e.Close()
	}
	for _, r := range rs {
		_ = r.Close()
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	close(s.quit)
	<-s.electionDone // it deletes the latch before it ends
	s.conn.Close()
	<-s.sessionDone // the client closes its event channel last
	err := s.fs.Close()
	s.log.Info().Msg("ha: closed")
	return err
}
