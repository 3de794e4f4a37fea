package ha

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/ha/zktest"
)

// Three processes contend; exactly one leads. Closing the leader elects
// another with a new session id, and a retriever sees every leader, then
// none.
func TestZKElectionOneOfThreeAndFailover(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	watcher := c.open(nil)
	l := newListener()
	if _, err := watcher.LeaderRetriever(DispatcherComponent, l); err != nil {
		t.Fatal(err)
	}
	l.await(t, "no leader", LeaderInformation.IsEmpty)

	type proc struct {
		s *zkServices
		c *contender
		e LeaderElection
	}
	var procs []*proc
	elected := make(chan *contender, 16)
	for i := 0; i < 3; i++ {
		p := &proc{s: c.open(nil), c: newContender()}
		p.c.anyGrant = elected
		var err error
		if p.e, err = p.s.LeaderElection(DispatcherComponent, p.c); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
	}

	var (
		seen     []SessionID
		closedAt time.Time
	)
	for round := 0; round < 3; round++ {
		// Exactly one of the open processes is granted.
		var (
			leader *proc
			got    SessionID
		)
		select {
		case winner := <-elected:
			for _, p := range procs {
				if p.c == winner {
					leader = p
				}
			}
			got = leader.c.awaitGrant(t)
		case <-time.After(wait):
			t.Fatal("nobody was elected")
		}
		if round > 0 {
			// The old latch was deleted on Close, so this is prompt; a
			// killed leader's would go within the session timeout
			// (TestZKExpiredLeaderIsRevokedAndFenced).
			took := time.Since(closedAt)
			t.Logf("failover after the leader closed: %s", took)
			if took > testSessionTimeout+5*time.Second {
				t.Errorf("failover took %s", took)
			}
		}
		if slices.Contains(seen, got) {
			t.Fatalf("round %d: session id %s reused", round, got)
		}
		seen = append(seen, got)
		addr := fmt.Sprintf("jm-%d:6123", round)
		if err := leader.e.ConfirmLeadership(ctx, got, addr); err != nil {
			t.Fatal(err)
		}
		info := l.await(t, addr, func(i LeaderInformation) bool { return !i.IsEmpty() })
		if info.Address != addr || info.SessionID != got {
			t.Fatalf("retrieved %+v; want %s with %s", info, addr, got)
		}
		if info, err := RetrieveLeader(ctx, watcher, DispatcherComponent); err != nil || info.Address != addr {
			t.Fatalf("RetrieveLeader = %+v, %v", info, err)
		}
		for _, p := range procs {
			if p != leader && (p.e.HasLeadership(got) || p.s.leadingNow()) {
				t.Fatalf("two leaders")
			}
		}
		// Close the leader's process: its session ends and the latch with it.
		closedAt = time.Now()
		if err := leader.s.Close(); err != nil {
			t.Fatal(err)
		}
		leader.c.awaitRevoke(t)
		if _, err := leader.s.JobGraphStore().JobIDs(ctx); err == nil {
			t.Errorf("closed services still answer")
		}
		procs = slices.DeleteFunc(procs, func(p *proc) bool { return p == leader })
	}
	if len(seen) != 3 || len(procs) != 0 {
		t.Fatalf("sessions %v, %d processes left", seen, len(procs))
	}
	l.await(t, "no leader once all are gone", LeaderInformation.IsEmpty)
}

// awaitState waits until s's session state satisfies ok.
func awaitState(t *testing.T, s *zkServices, ok func(sessionState, int64) bool) {
	t.Helper()
	changes, unsubscribe := s.subscribe()
	defer unsubscribe()
	deadline := time.After(wait)
	for {
		s.mu.Lock()
		state, id := s.state, s.sessionID
		s.mu.Unlock()
		if ok(state, id) {
			return
		}
		select {
		case <-changes:
		case <-deadline:
			t.Fatalf("session state stays %s", state)
		}
	}
}

// leadingNow reports whether the process holds leadership right now.
func (s *zkServices) leadingNow() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leading
}

// A leader whose process stalls (no traffic to ZooKeeper) is revoked once
// its connection is suspended; its session expires, a standby takes over
// within the session timeout, and the stale leader's fenced writes fail
// before and after it reconnects.
func TestZKExpiredLeaderIsRevokedAndFenced(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	px := zktest.NewProxy(t, strings.Split(c.quorum, ",")[0])
	a, ac := c.open(px), newContender()
	ae, err := a.LeaderElection(DispatcherComponent, ac)
	if err != nil {
		t.Fatal(err)
	}
	old := ac.awaitGrant(t)
	if err := a.JobGraphStore().PutJobGraph(ctx, old, "job1", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	staleCheck, err := a.fence(old)
	if err != nil {
		t.Fatal(err)
	}

	if err := ae.ConfirmLeadership(ctx, old, "a:1"); err != nil {
		t.Fatal(err)
	}
	b, bc := c.open(nil), newContender()
	be, err := b.LeaderElection(DispatcherComponent, bc)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-bc.grants:
		t.Fatal("standby granted while the leader lives")
	default:
	}
	l := newListener()
	if _, err := b.LeaderRetriever(DispatcherComponent, l); err != nil {
		t.Fatal(err)
	}
	l.await(t, "a:1", func(i LeaderInformation) bool { return i.Address == "a:1" && i.SessionID == old })

	px.Pause()
	paused := time.Now()
	ac.awaitRevoke(t) // suspended: revoked at once
	if err := a.JobGraphStore().PutJobGraph(ctx, old, "job1", []byte("v2")); !isNotLeader(err) {
		t.Fatalf("write of a revoked leader: %v", err)
	}
	if ae.HasLeadership(old) {
		t.Fatal("HasLeadership after revocation")
	}
	newSession := bc.awaitGrant(t) // A's session expired on the server
	took := time.Since(paused)
	t.Logf("standby took over %s after the leader stalled (session timeout %s)", took, testSessionTimeout)
	if took > testSessionTimeout+5*time.Second {
		t.Errorf("takeover took %s; session timeout %s", took, testSessionTimeout)
	}
	if newSession == old {
		t.Fatal("the new leader reuses the old session id")
	}
	// A's address went with its session.
	l.await(t, "no leader after A's session expired", LeaderInformation.IsEmpty)
	if err := be.ConfirmLeadership(ctx, newSession, "b:1"); err != nil {
		t.Fatal(err)
	}
	l.await(t, "b:1", func(i LeaderInformation) bool { return i.Address == "b:1" && i.SessionID == newSession })
	// The server-side check: a multi-op that carries the deposed leader's
	// latch fails even if its process had not noticed.
	if err := b.multiChecked(staleCheck, &zk.SetDataRequest{Path: b.base, Version: -1}); !isNotLeader(err) {
		t.Fatalf("stale fenced write: %v", err)
	}

	oldZK := a.conn.SessionID()
	px.Resume() // A reconnects to find its session expired, and rejoins as a standby.
	awaitState(t, a, func(state sessionState, id int64) bool { return state == stateConnected && id != oldZK })
	if err := b.JobGraphStore().PutJobGraph(ctx, newSession, "job1", []byte("v3")); err != nil {
		t.Fatal(err)
	}
	if err := a.JobGraphStore().PutJobGraph(ctx, old, "job1", []byte("v4")); !isNotLeader(err) {
		t.Fatalf("write of the deposed leader after reconnecting: %v", err)
	}
	g, err := a.JobGraphStore().RecoverJobGraph(ctx, "job1")
	if err != nil || string(g) != "v3" {
		t.Fatalf("graph %q, %v", g, err)
	}
	// B goes: A, back in the election with a new latch, leads again.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if again := ac.awaitGrant(t); again == old || again == newSession {
		t.Fatalf("re-granted with an old session id %s", again)
	}
}

// Stores written by one leader are recovered by the next process.
func TestZKStoresSurviveANewProcess(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	a, ac := c.open(nil), newContender()
	if _, err := a.LeaderElection(DispatcherComponent, ac); err != nil {
		t.Fatal(err)
	}
	sa := ac.awaitGrant(t)

	if err := a.JobGraphStore().PutJobGraph(ctx, sa, "j1", []byte("graph-1")); err != nil {
		t.Fatal(err)
	}
	if err := a.JobGraphStore().PutJobGraph(ctx, sa, "j2", []byte("graph-2")); err != nil {
		t.Fatal(err)
	}
	if err := a.JobGraphStore().PutJobGraph(ctx, sa, "j2", []byte("graph-2b")); err != nil {
		t.Fatal(err)
	}
	cs, err := a.CompletedCheckpointStore(ctx, "j1", 2)
	if err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= 3; id++ {
		sub, err := cs.AddCheckpoint(ctx, sa, CompletedCheckpoint{ID: id, Location: fmt.Sprintf("file:///ck/j1/chk-%d", id)})
		if err != nil {
			t.Fatal(err)
		}
		if id == 3 && (len(sub) != 1 || sub[0].ID != 1) {
			t.Fatalf("subsumed %+v", sub)
		}
	}
	if _, err := cs.AddCheckpoint(ctx, sa, CompletedCheckpoint{ID: 2}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("older checkpoint: %v", err)
	}
	ctr := a.CheckpointIDCounter("j1")
	for want := int64(1); want <= 3; want++ {
		if got, err := ctr.GetAndIncrement(ctx, sa); err != nil || got != want {
			t.Fatalf("GetAndIncrement = %d, %v; want %d", got, err, want)
		}
	}
	if err := a.BlobStore().Put(ctx, "blob-1", strings.NewReader("binary")); err != nil {
		t.Fatal(err)
	}
	if err := a.JobResultStore().CreateDirtyResult(ctx, sa, JobResult{JobID: "j0", State: "FINISHED"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	b, bc := c.open(nil), newContender()
	if _, err := b.LeaderElection(DispatcherComponent, bc); err != nil {
		t.Fatal(err)
	}
	sb := bc.awaitGrant(t)
	ids, err := b.JobGraphStore().JobIDs(ctx)
	if err != nil || !slices.Equal(ids, []string{"j1", "j2"}) {
		t.Fatalf("JobIDs = %v, %v", ids, err)
	}
	if g, err := b.JobGraphStore().RecoverJobGraph(ctx, "j2"); err != nil || string(g) != "graph-2b" {
		t.Fatalf("j2 = %q, %v", g, err)
	}
	files, err := b.fs.ReadDir(ctx, b.fsBase+"/jobgraphs")
	if err != nil || len(files) != 2 {
		t.Fatalf("graph files %v, %v: the replaced one must be gone", files, err)
	}
	cs2, err := b.CompletedCheckpointStore(ctx, "j1", 2)
	if err != nil {
		t.Fatal(err)
	}
	if all := cs2.All(); len(all) != 2 || all[0].ID != 2 || all[1].Location != "file:///ck/j1/chk-3" {
		t.Fatalf("recovered checkpoints %+v", all)
	}
	if n, err := b.CheckpointIDCounter("j1").GetAndIncrement(ctx, sb); err != nil || n != 4 {
		t.Fatalf("counter after recovery = %d, %v", n, err)
	}
	rc, err := b.BlobStore().Get(ctx, "blob-1")
	if got := readAll(t, rc, err); got != "binary" {
		t.Fatalf("blob %q", got)
	}
	if has, err := b.JobResultStore().HasJobResultEntry(ctx, "j0"); err != nil || !has {
		t.Fatalf("result entry of j0: %v, %v", has, err)
	}
	if err := b.JobGraphStore().RemoveJobGraph(ctx, sb, "j1"); err != nil {
		t.Fatal(err)
	}
	if err := b.JobGraphStore().RemoveJobGraph(ctx, sb, "j1"); err != nil {
		t.Fatalf("second remove: %v", err)
	}
	if _, err := b.JobGraphStore().RecoverJobGraph(ctx, "j1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("removed graph: %v", err)
	}
	if cleared, err := cs2.Clear(ctx, sb); err != nil || len(cleared) != 2 {
		t.Fatalf("Clear = %v, %v", cleared, err)
	}
	if err := b.CheckpointIDCounter("j1").Remove(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if n, err := b.CheckpointIDCounter("j1").Get(ctx); err != nil || n != 1 {
		t.Fatalf("removed counter = %d, %v", n, err)
	}
	if err := b.BlobStore().Delete(ctx, "blob-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.BlobStore().Get(ctx, "blob-1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted blob: %v", err)
	}
}

// The counter's compare-and-set hands out every id once under concurrent
// increments, and only the leader's increments count.
func TestZKCheckpointIDCounterCAS(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	a, ac := c.open(nil), newContender()
	if _, err := a.LeaderElection(DispatcherComponent, ac); err != nil {
		t.Fatal(err)
	}
	sa := ac.awaitGrant(t)
	b, bc := c.open(nil), newContender()
	if _, err := b.LeaderElection(DispatcherComponent, bc); err != nil {
		t.Fatal(err)
	}

	const workers, each = 4, 10
	ids := make(chan int64, workers*each)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(2)
		go func() { // the leader, through two counter handles
			defer wg.Done()
			for i := 0; i < each; i++ {
				n, err := a.CheckpointIDCounter("job").GetAndIncrement(ctx, sa)
				if err != nil {
					t.Error(err)
					return
				}
				ids <- n
			}
		}()
		go func() { // a standby holding the same token never gets one
			defer wg.Done()
			if _, err := b.CheckpointIDCounter("job").GetAndIncrement(ctx, sa); !isNotLeader(err) {
				t.Errorf("standby increment: %v", err)
			}
		}()
	}
	wg.Wait()
	close(ids)
	var got []int64
	for n := range ids {
		got = append(got, n)
	}
	slices.Sort(got)
	for i, n := range got {
		if n != int64(i+1) {
			t.Fatalf("ids %v: not 1..%d each once", got, workers*each)
		}
	}
	if err := a.CheckpointIDCounter("job").SetCount(ctx, sa, 100); err != nil {
		t.Fatal(err)
	}
	if n, err := b.CheckpointIDCounter("job").Get(ctx); err != nil || n != 100 {
		t.Fatalf("Get = %d, %v", n, err)
	}
}

func TestZKJobResultStoreDirtyClean(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	a, ac := c.open(nil), newContender()
	if _, err := a.LeaderElection(DispatcherComponent, ac); err != nil {
		t.Fatal(err)
	}
	s := ac.awaitGrant(t)
	jrs := a.JobResultStore()
	r := JobResult{JobID: "job-a", State: "FAILED", Result: []byte(`{"error":"boom"}`)}
	if err := jrs.CreateDirtyResult(ctx, s, r); err != nil {
		t.Fatal(err)
	}
	if err := jrs.CreateDirtyResult(ctx, s, r); !errors.Is(err, ErrExists) {
		t.Fatalf("second dirty entry: %v", err)
	}
	dirty, err := jrs.DirtyResults(ctx)
	if err != nil || len(dirty) != 1 || dirty[0].JobID != "job-a" || string(dirty[0].Result) != `{"error":"boom"}` {
		t.Fatalf("DirtyResults = %+v, %v", dirty, err)
	}
	if ok, _ := jrs.HasCleanJobResultEntry(ctx, "job-a"); ok {
		t.Fatal("clean before MarkResultAsClean")
	}
	if got, err := jrs.GetJobResult(ctx, "job-a"); err != nil || got.State != "FAILED" {
		t.Fatalf("GetJobResult of the dirty entry = %+v, %v", got, err)
	}
	if _, err := jrs.GetJobResult(ctx, "job-b"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetJobResult of no entry: %v", err)
	}
	if err := jrs.MarkResultAsClean(ctx, SessionID{1}, "job-a"); !isNotLeader(err) {
		t.Fatalf("clean with a wrong session: %v", err)
	}
	for i := 0; i < 2; i++ { // idempotent
		if err := jrs.MarkResultAsClean(ctx, s, "job-a"); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := jrs.HasCleanJobResultEntry(ctx, "job-a"); err != nil || !ok {
		t.Fatalf("clean entry: %v %v", ok, err)
	}
	if ok, err := jrs.HasJobResultEntry(ctx, "job-a"); err != nil || !ok {
		t.Fatalf("entry: %v %v", ok, err)
	}
	if got, err := jrs.GetJobResult(ctx, "job-a"); err != nil || got.State != "FAILED" {
		t.Fatalf("GetJobResult of the clean entry = %+v, %v", got, err)
	}
	if dirty, _ := jrs.DirtyResults(ctx); len(dirty) != 0 {
		t.Fatalf("dirty after clean: %+v", dirty)
	}
	if err := jrs.MarkResultAsClean(ctx, s, "job-b"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("clean without entry: %v", err)
	}
	if err := jrs.CreateDirtyResult(ctx, s, JobResult{JobID: "job-a"}); !errors.Is(err, ErrExists) {
		t.Fatalf("dirty after clean: %v", err)
	}
}

// An unreachable quorum fails within the connection timeout, naming it.
func TestZKUnreachableQuorum(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	cfg := Config{Type: conf.HighAvailabilityZooKeeper, Quorum: addr, Root: "/gofl", ClusterID: "/default",
		StorageDir: "file://" + t.TempDir(), SessionTimeout: time.Second, ConnectionTimeout: 700 * time.Millisecond}
	start := time.Now()
	s, err := New(context.Background(), cfg)
	if err == nil {
		s.Close()
		t.Fatal("connected to nothing")
	}
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "700ms") {
		t.Fatalf("err = %v", err)
	}
	if took := time.Since(start); took > cfg.ConnectionTimeout+5*time.Second {
		t.Errorf("took %s", took)
	}

	cfg.StorageDir = "ftp://nowhere/ha"
	if _, err := New(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "ftp://nowhere/ha") {
		t.Fatalf("bad storageDir: %v", err)
	}
}

// CleanupClusterData removes the cluster's znode tree and its part of
// storageDir, and leaves other clusters' alone.
func TestZKCleanupClusterData(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	other := c.config()
	other.ClusterID = "/other"
	o, err := New(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.(*zkServices).ensurePath(o.(*zkServices).base + "/jobgraphs"); err != nil {
		t.Fatal(err)
	}
	a, ac := c.open(nil), newContender()
	if _, err := a.LeaderElection(DispatcherComponent, ac); err != nil {
		t.Fatal(err)
	}
	s := ac.awaitGrant(t)
	if err := a.JobGraphStore().PutJobGraph(ctx, s, "j1", []byte("graph")); err != nil {
		t.Fatal(err)
	}
	if err := a.JobResultStore().CreateDirtyResult(ctx, s, JobResult{JobID: "j0", State: "FAILED"}); err != nil {
		t.Fatal(err)
	}
	if err := a.BlobStore().Put(ctx, "blob-1", strings.NewReader("binary")); err != nil {
		t.Fatal(err)
	}
	conn, base, fsBase := a.conn, a.base, a.fs.URI(a.fsBase)
	if ok, _, err := conn.Exists(base + "/jobgraphs/j1"); err != nil || !ok {
		t.Fatalf("the job graph's znode: %v %v", ok, err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := CleanupClusterData(ctx, c.config()); err != nil {
		t.Fatal(err)
	}
	if err := CleanupClusterData(ctx, c.config()); err != nil { // idempotent
		t.Fatalf("second cleanup: %v", err)
	}
	dir := strings.TrimPrefix(fsBase, "file://")
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s after the cleanup: %v", dir, err)
	}
	b := c.open(nil)
	if ok, _, err := b.conn.Exists(base); err != nil || ok {
		t.Fatalf("znode %s after the cleanup: exists %v, %v", base, ok, err)
	}
	if ok, _, err := b.conn.Exists(o.(*zkServices).base); err != nil || !ok {
		t.Fatalf("the other cluster's znode: exists %v, %v", ok, err)
	}
	_ = b.Close()
	_ = o.Close()
	noCluster := c.config()
	noCluster.ClusterID = "/"
	if err := CleanupClusterData(ctx, noCluster); !errors.Is(err, ErrInvalid) {
		t.Fatalf("cleanup without a cluster id: %v", err)
	}
}
