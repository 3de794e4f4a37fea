package storage

import (
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// stallProxy forwards TCP to target until stalled; while stalled it keeps
// connections open but passes nothing, like a hung NameNode.
type stallProxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	stall  bool
	conns  []net.Conn
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{l: l, target: target}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *stallProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *stallProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for p.stalled() {
			time.Sleep(10 * time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err == io.EOF {
				dst.(*net.TCPConn).CloseWrite()
			}
			return
		}
	}
}

func (p *stallProxy) stalled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stall
}

func (p *stallProxy) setStall(s bool) {
	p.mu.Lock()
	p.stall = s
	p.mu.Unlock()
}

func (p *stallProxy) close() {
	p.l.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stall = false
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// A NameNode that stops answering after Open fails calls within IOTimeout
// with ErrUnavailable naming it, and the client recovers once it is back.
func TestHDFSNameNodeHangsThenRecovers(t *testing.T) {
	uri := hdfsTestURI(t)
	u, _ := url.Parse(uri)
	proxy := newStallProxy(t, u.Host)
	addr := proxy.l.Addr().String()
	ctx := testCtx(t)
	fsys, _, err := Open(ctx, "hdfs://"+addr+"/", Options{User: testHDFSUser, IOTimeout: 5 * time.Second, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	if _, err := fsys.Stat(ctx, "/"); err != nil {
		t.Fatal(err)
	}

	proxy.setStall(true)
	for i := range 2 {
		start := time.Now()
		_, err := fsys.Stat(ctx, "/")
		t.Logf("call %d while hung, after %v: %v", i, time.Since(start), err)
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), addr) {
			t.Fatalf("Stat on a hung NameNode = %v, want ErrUnavailable naming %s", err, addr)
		}
		// A few IOTimeouts at most, far from the test's two minutes
		// (a timeout short enough to fire on a loaded machine's healthy
		// NameNode would make the calls above flaky).
		if d := time.Since(start); d > time.Minute {
			t.Fatalf("took %v", d)
		}
	}

	proxy.setStall(false)
	deadline := time.Now().Add(time.Minute) // colinmarc/hdfs backs off a failed NameNode for 5s
	for {
		_, err := fsys.Stat(ctx, "/")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
