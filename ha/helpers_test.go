package ha

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/ha/zktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait is the generous deadline of every event a test waits for.
const wait = 30 * time.Second

// testSessionTimeout is short so that expiry tests are quick; run.sh's
// tickTime (100 ms) allows it.
const testSessionTimeout = 1500 * time.Millisecond

// cluster is one ZooKeeper root and storageDir that several services
// ("processes") of a test share.
type cluster struct {
	t          *testing.T
	quorum     string
	root       string
	storageDir string
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &cluster{t: t, quorum: zktest.Quorum(t), root: "/gofl-test-" + hex.EncodeToString(b[:]),
		storageDir: "file://" + t.TempDir()}
}

func (c *cluster) config() Config {
	return Config{
		Type: conf.HighAvailabilityZooKeeper, Quorum: c.quorum, Root: c.root, ClusterID: "/default",
		StorageDir: c.storageDir, SessionTimeout: testSessionTimeout, ConnectionTimeout: 10 * time.Second,
		Logger: zerolog.New(zerolog.NewTestWriter(c.t)).Level(zerolog.InfoLevel),
	}
}

// open starts one process's services; a non-nil proxy carries its traffic.
func (c *cluster) open(p *proxy) *zkServices {
	c.t.Helper()
	cfg := c.config()
	if p != nil {
		cfg.Dialer = p.dial
	}
	s, err := New(context.Background(), cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = s.Close() })
	return s.(*zkServices)
}

// contender records its calls on channels.
type contender struct {
	grants  chan SessionID
	revokes chan struct{}
	errs    chan error
	// anyGrant, if set, also receives the contender on each grant, so a
	// test can wait for whichever of several is elected.
	anyGrant chan *contender
}

func newContender() *contender {
	return &contender{grants: make(chan SessionID, 16), revokes: make(chan struct{}, 16), errs: make(chan error, 16)}
}

func (c *contender) GrantLeadership(s SessionID) {
	c.grants <- s
	if c.anyGrant != nil {
		c.anyGrant <- c
	}
}
func (c *contender) RevokeLeadership()     { c.revokes <- struct{}{} }
func (c *contender) HandleError(err error) { c.errs <- err }

func (c *contender) awaitGrant(t *testing.T) SessionID {
	t.Helper()
	select {
	case s := <-c.grants:
		return s
	case <-time.After(wait):
		t.Fatal("no grant")
	}
	return SessionID{}
}

func (c *contender) awaitRevoke(t *testing.T) {
	t.Helper()
	select {
	case <-c.revokes:
	case <-time.After(wait):
		t.Fatal("no revocation")
	}
}

// listener records retrieval notifications.
type listener struct{ infos chan LeaderInformation }

func newListener() *listener { return &listener{infos: make(chan LeaderInformation, 64)} }

func (l *listener) NotifyLeaderAddress(info LeaderInformation) { l.infos <- info }
func (l *listener) HandleError(error)                          {}

// await returns the first notification that satisfies ok.
func (l *listener) await(t *testing.T, what string, ok func(LeaderInformation) bool) LeaderInformation {
	t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case info := <-l.infos:
			if ok(info) {
				return info
			}
		case <-deadline:
			t.Fatalf("retrieval never reported %s", what)
		}
	}
}

// proxy forwards TCP connections to ZooKeeper and can stall them, as a
// stopped process or a partition would: nothing gets through while paused,
// so the client's pings stop and the server expires its session.
type proxy struct {
	t      *testing.T
	target string
	ln     net.Listener

	mu     sync.Mutex
	paused bool
	gate   chan struct{} // closed when not paused
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	close(gate)
	p := &proxy{t: t, target: target, ln: ln, gate: gate, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// dial ignores the address the client picked and goes through the proxy.
func (p *proxy) dial(_, _ string, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", p.ln.Addr().String(), timeout)
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, s)
		go p.pipe(s, c)
	}
}

func (p *proxy) pipe(from, to net.Conn) {
	defer p.wg.Done()
	defer to.Close()
	defer from.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate := p.gate
			p.mu.Unlock()
			<-gate
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// pause holds every byte until resume. Connections that the client gives
// up on are dropped when it closes them.
func (p *proxy) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused {
		p.paused, p.gate = true, make(chan struct{})
	}
}

func (p *proxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		p.paused = false
		close(p.gate)
	}
}

func (p *proxy) close() {
	p.ln.Close()
	p.resume()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func isNotLeader(err error) bool { return errors.Is(err, ErrNotLeader) }

func readAll(t *testing.T, rc io.ReadCloser, err error) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
