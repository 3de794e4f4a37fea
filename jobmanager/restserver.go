package jobmanager

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// newRESTServer is the JobManager's REST server. Its Shutdown closes the
// connections that never sent a request at once, and so does it with any
// that arrives meanwhile: net/http waits up to 5 s for such a connection,
// taking it for a request on its way. An attached client whose transport
// kept a spare connection open waited for this process to exit while
// this process waited for that connection, until the client gave up (its
// 3 s wait at the end of `gofl run`, in about 1 run of 20). A connection
// closed so has sent nothing the server read, and the attached client
// has fetched the final state before the shutdown begins.
func newRESTServer(h http.Handler) *http.Server {
	f := &freshConns{conns: map[net.Conn]struct{}{}}
	s := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ConnState: f.track}
	// Shutdown calls it once its listeners are closed.
	s.RegisterOnShutdown(f.closeAll)
	return s
}

// freshConns tracks a server's connections in http.StateNew.
type freshConns struct {
	mu      sync.Mutex
	closing bool
	conns   map[net.Conn]struct{}
}

func (f *freshConns) track(c net.Conn, st http.ConnState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case st == http.StateNew && f.closing:
		_ = c.Close()
	case st == http.StateNew:
		f.conns[c] = struct{}{}
	default:
		delete(f.conns, c)
	}
}

func (f *freshConns) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closing = true
	for c := range f.conns {
		_ = c.Close()
		delete(f.conns, c)
	}
}
