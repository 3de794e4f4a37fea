package ha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Leader election: one latch per process (Flink's
// DefaultLeaderElectionService over one ZooKeeper connection), shared by
// every contender of the process. The process with the lowest ephemeral
// sequential node under <base>/leader/latch leads; each grant gets a fresh
// SessionID, given to every contender. Losing the connection (suspended)
// or the session (expired) revokes at once, as Flink does without
// high-availability.zookeeper.client.tolerate-suspended-connections.

const latchPrefix = "latch-"

func (s *zkServices) latchDir() string { return path.Join(s.base, "leader", "latch") }

func (s *zkServices) connectionInfoPath(component string) string {
	return path.Join(s.base, "leader", component, "connection_info")
}

func (s *zkServices) LeaderElection(component string, contender LeaderContender) (LeaderElection, error) {
	if err := validKey("component", component); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, ErrClosed
	}
	if _, dup := s.contenders[component]; dup {
		return nil, fmt.Errorf("%w: a contender for %q is already registered", ErrInvalid, component)
	}
	e := &zkElection{s: s, component: component, contender: contender, events: newSerial()}
	s.contenders[component] = e
	if s.leading {
		e.grantLocked(s.leader)
	}
	s.wakeElection()
	return e, nil
}

// electionLoop keeps this process's latch node while it has contenders,
// and grants and revokes them. It is the only writer of latch and leading.
func (s *zkServices) electionLoop() {
	defer close(s.electionDone)
	var watch <-chan zk.Event
	for {
		if watch == nil {
			watch = s.electionStep()
		}
		select {
		case <-s.quit:
			s.withdraw()
			return
		case <-s.wake:
			watch = nil
		case <-watch:
			watch = nil
		case <-s.retryAfter(watch):
			watch = nil
		}
	}
}

// retryAfter returns a timer channel when the last step could not set a
// watch (a ZooKeeper error), so that the loop tries again.
func (s *zkServices) retryAfter(watch <-chan zk.Event) <-chan time.Time {
	if watch != nil {
		return nil
	}
	return time.After(200 * time.Millisecond)
}

// electionStep brings the latch in line with the session and the
// contenders and returns a watch to wait on; nil means wait for a wake-up
// (or retry soon).
func (s *zkServices) electionStep() <-chan zk.Event {
	s.mu.Lock()
	state, sess, n, latch, latchSess := s.state, s.sessionID, len(s.contenders), s.latch, s.latchSess
	s.mu.Unlock()

	if state != stateConnected {
		s.revoke("ZooKeeper connection " + state.String())
		if state == stateExpired {
			s.setLatch("", 0)
		}
		return neverFires
	}
	if latch != "" && latchSess != sess {
		// The session that owned the latch expired, and the node with it.
		s.revoke("ZooKeeper session expired")
		s.setLatch("", 0)
		latch = ""
	}
	if n == 0 {
		s.revoke("no contenders")
		if latch != "" {
			s.deleteLatch(latch)
		}
		return neverFires
	}
	if latch == "" {
		if err := s.ensurePath(s.latchDir()); err != nil {
			s.log.Warn().Err(err).Msg("ha: cannot create the latch directory")
			return nil
		}
		created, err := s.conn.CreateProtectedEphemeralSequential(path.Join(s.latchDir(), latchPrefix), nil, zk.WorldACL(zk.PermAll))
		if err != nil {
			s.log.Warn().Err(err).Msg("ha: cannot create the latch node")
			return nil
		}
		latch = created
		s.setLatch(latch, sess)
		s.log.Debug().Str("latch", latch).Msg("ha: joined the leader election")
	}

	children, _, err := s.conn.Children(s.latchDir())
	if err != nil {
		s.log.Warn().Err(err).Msg("ha: cannot list the latch nodes")
		return nil
	}
	sort.Slice(children, func(i, j int) bool { return latchSeq(children[i]) < latchSeq(children[j]) })
	mine := path.Base(latch)
	idx := -1
	for i, c := range children {
		if c == mine {
			idx = i
		}
	}
	if idx < 0 {
		// Deleted under us (by an operator, or the session went): start over.
		s.revoke("latch node deleted")
		s.setLatch("", 0)
		return nil
	}
	// Watch our own node if we lead (its deletion ends leadership), else
	// our predecessor (its deletion may make us the leader).
	target := latch
	if idx > 0 {
		target = path.Join(s.latchDir(), children[idx-1])
	}
	ok, _, watch, err := s.conn.ExistsW(target)
	if err != nil {
		s.log.Warn().Err(err).Str("node", target).Msg("ha: cannot watch a latch node")
		return nil
	}
	if !ok {
		return closedEvents // gone already: look again
	}
	if idx == 0 {
		s.grant()
	}
	return watch
}

// neverFires is a watch that waits for a wake-up only.
var neverFires = make(chan zk.Event)

var closedEvents = func() chan zk.Event { c := make(chan zk.Event); close(c); return c }()

// latchSeq is the sequence number ZooKeeper appended to a latch node name.
func latchSeq(name string) string {
	if i := strings.LastIndex(name, latchPrefix); i >= 0 {
		return name[i+len(latchPrefix):]
	}
	return name
}

func (s *zkServices) setLatch(latch string, sess int64) {
	s.mu.Lock()
	s.latch, s.latchSess = latch, sess
	s.mu.Unlock()
}

func (s *zkServices) deleteLatch(latch string) {
	if err := s.conn.Delete(latch, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		s.log.Warn().Err(err).Str("latch", latch).Msg("ha: cannot delete the latch node; it goes with the session")
	}
	s.setLatch("", 0)
}

// grant makes this process the leader with a fresh session id, unless it
// already leads.
func (s *zkServices) grant() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leading {
		return
	}
	s.leading, s.leader = true, NewSessionID()
	for _, e := range s.contenders {
		e.grantLocked(s.leader)
	}
	s.log.Info().Stringer("leaderSession", s.leader).Str("latch", s.latch).Msg("ha: granted leadership")
}

// revoke ends this process's leadership, if it leads.
func (s *zkServices) revoke(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.leading {
		return
	}
	s.leading = false
	for _, e := range s.contenders {
		e.revokeLocked()
	}
	s.log.Warn().Stringer("leaderSession", s.leader).Str("reason", why).Msg("ha: leadership revoked")
}

// withdraw leaves the election when the services close.
func (s *zkServices) withdraw() {
	s.revoke("closing")
	s.mu.Lock()
	latch := s.latch
	s.mu.Unlock()
	if latch != "" {
		s.deleteLatch(latch)
	}
}

// zkElection is one contender's handle.
type zkElection struct {
	s         *zkServices
	component string
	contender LeaderContender
	events    *serial
	once      sync.Once

	// granted is the session last granted to this contender and not yet
	// revoked; under s.mu.
	granted *SessionID
}

func (e *zkElection) grantLocked(session SessionID) {
	e.granted = &session
	e.events.post(func() { e.contender.GrantLeadership(session) })
}

func (e *zkElection) revokeLocked() {
	if e.granted == nil {
		return
	}
	e.granted = nil
	e.events.post(e.contender.RevokeLeadership)
}

func (e *zkElection) HasLeadership(session SessionID) bool {
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	return e.granted != nil && *e.granted == session && e.s.contenders[e.component] == e
}

func (e *zkElection) ConfirmLeadership(_ context.Context, session SessionID, address string) error {
	if !e.HasLeadership(session) {
		return fmt.Errorf("%w: %s: session %s is not granted", ErrNotLeader, e.component, session)
	}
	p := e.s.connectionInfoPath(e.component)
	if err := e.s.ensurePath(path.Dir(p)); err != nil {
		return err
	}
	data, err := json.Marshal(LeaderInformation{SessionID: session, Address: address})
	if err != nil {
		return err
	}
	// Ephemeral: it vanishes with the leader's session, so retrievers see
	// "no leader" instead of a dead address. Replace, never update, so the
	// node belongs to the current session.
	for attempt := 0; ; attempt++ {
		var ops []any
		if ok, _, err := e.s.conn.Exists(p); err != nil {
			return e.s.zkErr("exists", p, err)
		} else if ok {
			ops = append(ops, &zk.DeleteRequest{Path: p, Version: -1})
		}
		ops = append(ops, &zk.CreateRequest{Path: p, Data: data, Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagEphemeral})
		err := e.s.fencedMulti(session, ops...)
		if err == nil || attempt == 2 || !(errors.Is(err, zk.ErrNodeExists) || errors.Is(err, ErrNotFound)) {
			return err
		}
	}
}

func (e *zkElection) Close() error {
	e.once.Do(func() {
		s := e.s
		s.mu.Lock()
		session, leads := e.granted, e.granted != nil
		s.mu.Unlock()
		if leads {
			// Remove our address while still fenced, so that no retriever
			// keeps following a component that is gone.
			p := s.connectionInfoPath(e.component)
			if err := s.fencedMulti(*session, &zk.DeleteRequest{Path: p, Version: -1}); err != nil && !errors.Is(err, ErrNotFound) {
				s.log.Debug().Err(err).Str("component", e.component).Msg("ha: connection info not removed")
			}
		}
		s.mu.Lock()
		e.revokeLocked()
		delete(s.contenders, e.component)
		s.wakeElection()
		s.mu.Unlock()
		e.events.close()
	})
	return nil
}
