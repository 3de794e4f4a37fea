package jobmanager

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// acceptSignal signals accepted once per connection its Accept returned.
type acceptSignal struct {
	net.Listener
	accepted chan struct{}
}

func (l acceptSignal) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted <- struct{}{}
	}
	return c, err
}

// TestRESTServerShutdownClosesConnectionsThatSentNothing: a connection
// that never sent a request does not hold the shutdown back (net/http
// alone waits 5 s for it), and a request in flight is still answered.
func TestRESTServerShutdownClosesConnectionsThatSentNothing(t *testing.T) {
	inHandler, release := make(chan struct{}), make(chan struct{})
	srv := newRESTServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(inHandler)
		<-release
		w.WriteHeader(http.StatusNoContent)
	}))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := acceptSignal{lis, make(chan struct{}, 2)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()

	// A request in flight, and a spare connection that sends nothing.
	answered := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + lis.Addr().String() + "/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				err = errors.New(resp.Status)
			}
		}
		answered <- err
	}()
	<-inHandler
	<-l.accepted
	spare, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer spare.Close()
	<-l.accepted

	// Shorter than net/http's 5 s for a connection that sent nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(ctx) }()
	// The read ends once the server closed the spare connection (EOF,
	// or a reset): without the fix, only after net/http's 5 s.
	_, _ = io.ReadAll(spare)
	close(release)
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v (a connection that sent nothing held it back)", err)
	}
	if err := <-answered; err != nil {
		t.Fatalf("the request in flight: %v", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
}
