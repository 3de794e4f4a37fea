// Package zktest finds the ZooKeeper that the HA tests run against.
package zktest

import (
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// DefaultQuorum is where `make zookeeper` (scripts/zookeeper/run.sh) listens.
const DefaultQuorum = "127.0.0.1:2181"

// Quorum returns the test ZooKeeper's connect string ("host:port[,...]"):
// $GOFL_TEST_ZOOKEEPER, which scripts/zookeeper/with-zk.sh sets for `make
// test`, else DefaultQuorum. If its first server does not accept a
// connection, the test fails under CI=true (where .ci/run starts
// ZooKeeper) and skips elsewhere, so ZooKeeper tests never pass by not
// running in CI.
func Quorum(t testing.TB) string {
	t.Helper()
	quorum := strings.TrimSpace(os.Getenv("GOFL_TEST_ZOOKEEPER"))
	if quorum == "" {
		quorum = DefaultQuorum
	}
	first, _, _ := strings.Cut(quorum, ",")
	if _, _, err := net.SplitHostPort(first); err != nil {
		t.Fatalf("GOFL_TEST_ZOOKEEPER=%q: want host:port[,host:port...]", quorum)
	}
	c, err := net.DialTimeout("tcp", first, 2*time.Second)
	if err != nil {
		msg := "ZooKeeper is not reachable at " + quorum + " (" + err.Error() + "); start it with `make zookeeper` " +
			"or run the tests through scripts/zookeeper/with-zk.sh, or point GOFL_TEST_ZOOKEEPER at one"
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true, so ZooKeeper tests must run: " + msg)
		}
		t.Skip("skipping: " + msg)
	}
	c.Close()
	return quorum
}

// Proxy forwards TCP connections to ZooKeeper and can stall them, as a
// stopped process or a partition would: nothing gets through while paused,
// so the client's pings stop and the server expires its session.
type Proxy struct {
	target string
	ln     net.Listener

	mu     sync.Mutex
	paused bool
	gate   chan struct{} // closed when not paused
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// NewProxy starts a proxy to target (host:port); the test's cleanup
// closes it.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	close(gate)
	p := &Proxy{target: target, ln: ln, gate: gate, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Dial ignores the address the client picked and goes through the proxy
// (ha.Config.Dialer).
func (p *Proxy) Dial(_, _ string, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", p.ln.Addr().String(), timeout)
}

func (p *Proxy) accept() {
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

func (p *Proxy) pipe(from, to net.Conn) {
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

// Pause holds every byte until resume. Connections that the client gives
// up on are dropped when it closes them.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused {
		p.paused, p.gate = true, make(chan struct{})
	}
}

// Resume lets the held bytes and the ones after them through.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		p.paused = false
		close(p.gate)
	}
}

// Close stops the proxy and its connections; idempotent.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Resume()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// Addr is the proxy's address, a quorum string for a client in another
// process.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }
