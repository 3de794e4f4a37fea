package ha

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
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
func (c *cluster) open(p *zktest.Proxy) *zkServices {
	c.t.Helper()
	cfg := c.config()
	if p != nil {
		cfg.Dialer = p.Dial
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
