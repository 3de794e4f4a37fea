package ha

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
)

func TestNoneGrantsAtOnceAndRetrievesFixedAddresses(t *testing.T) {
	ctx := context.Background()
	s, err := New(ctx, Config{Type: conf.HighAvailabilityNone,
		Addresses: map[string]string{ResourceManagerComponent: "jm:6123"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := newContender()
	e, err := s.LeaderElection(DispatcherComponent, c)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.awaitGrant(t); got != DefaultLeaderID {
		t.Fatalf("granted %s; want the default leader id", got)
	}
	if _, err := s.LeaderElection(DispatcherComponent, newContender()); !errors.Is(err, ErrInvalid) {
		t.Fatalf("second contender: %v", err)
	}
	if !e.HasLeadership(DefaultLeaderID) || e.HasLeadership(NewSessionID()) {
		t.Fatal("HasLeadership")
	}
	if err := e.ConfirmLeadership(ctx, NewSessionID(), "x:1"); !isNotLeader(err) {
		t.Fatalf("confirm with a foreign session: %v", err)
	}

	fixed := newListener()
	if _, err := s.LeaderRetriever(ResourceManagerComponent, fixed); err != nil {
		t.Fatal(err)
	}
	if got := fixed.await(t, "the fixed address", func(LeaderInformation) bool { return true }); got.Address != "jm:6123" || got.SessionID != DefaultLeaderID {
		t.Fatalf("fixed: %+v", got)
	}
	// A component without a fixed address is reported once confirmed in
	// this process, and gone when its contender closes.
	l := newListener()
	if _, err := s.LeaderRetriever(DispatcherComponent, l); err != nil {
		t.Fatal(err)
	}
	l.await(t, "no leader", LeaderInformation.IsEmpty)
	if err := e.ConfirmLeadership(ctx, DefaultLeaderID, "jm:8081"); err != nil {
		t.Fatal(err)
	}
	l.await(t, "jm:8081", func(i LeaderInformation) bool { return i.Address == "jm:8081" })
	if got, err := RetrieveLeader(ctx, s, DispatcherComponent); err != nil || got.Address != "jm:8081" {
		t.Fatalf("RetrieveLeader = %+v, %v", got, err)
	}
	short, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := RetrieveLeader(short, s, "nobody"); !errors.Is(err, context.Canceled) {
		t.Fatalf("RetrieveLeader without a leader: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	c.awaitRevoke(t)
	l.await(t, "no leader after close", LeaderInformation.IsEmpty)
	if e.HasLeadership(DefaultLeaderID) {
		t.Fatal("leads after Close")
	}
}

func TestNoneStores(t *testing.T) {
	ctx := context.Background()
	s := NewNone(nil)
	defer s.Close()
	other := NewSessionID()

	g := s.JobGraphStore()
	if err := g.PutJobGraph(ctx, other, "j", []byte("x")); !isNotLeader(err) {
		t.Fatalf("fenced put: %v", err)
	}
	if err := g.PutJobGraph(ctx, DefaultLeaderID, "j", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if b, err := g.RecoverJobGraph(ctx, "j"); err != nil || string(b) != "x" {
		t.Fatalf("recover %q %v", b, err)
	}
	if ids, _ := g.JobIDs(ctx); len(ids) != 1 {
		t.Fatalf("ids %v", ids)
	}
	if err := g.RemoveJobGraph(ctx, DefaultLeaderID, "j"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.RecoverJobGraph(ctx, "j"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("removed: %v", err)
	}

	cs, err := s.CompletedCheckpointStore(ctx, "j", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AddCheckpoint(ctx, DefaultLeaderID, CompletedCheckpoint{ID: 1, Location: "a"}); err != nil {
		t.Fatal(err)
	}
	sub, err := cs.AddCheckpoint(ctx, DefaultLeaderID, CompletedCheckpoint{ID: 2, Location: "b"})
	if err != nil || len(sub) != 1 || sub[0].Location != "a" {
		t.Fatalf("subsumed %v %v", sub, err)
	}
	if _, err := cs.AddCheckpoint(ctx, other, CompletedCheckpoint{ID: 3}); !isNotLeader(err) {
		t.Fatalf("fenced add: %v", err)
	}
	if cp, ok := cs.Latest(); !ok || cp.ID != 2 {
		t.Fatalf("latest %v %v", cp, ok)
	}
	again, _ := s.CompletedCheckpointStore(ctx, "j", 1)
	if cp, ok := again.Latest(); !ok || cp.ID != 2 {
		t.Fatalf("a restarted JobMaster sees %v %v", cp, ok)
	}
	if _, err := s.CompletedCheckpointStore(ctx, "j", 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("maxRetained 0: %v", err)
	}

	ctr := s.CheckpointIDCounter("j")
	if n, _ := ctr.GetAndIncrement(ctx, DefaultLeaderID); n != 1 {
		t.Fatalf("first id %d", n)
	}
	if _, err := ctr.GetAndIncrement(ctx, other); !isNotLeader(err) {
		t.Fatalf("fenced increment: %v", err)
	}
	if n, _ := s.CheckpointIDCounter("j").Get(ctx); n != 2 {
		t.Fatalf("next %d", n)
	}

	jrs := s.JobResultStore()
	if err := jrs.CreateDirtyResult(ctx, DefaultLeaderID, JobResult{JobID: "j", State: "FINISHED"}); err != nil {
		t.Fatal(err)
	}
	if err := jrs.CreateDirtyResult(ctx, DefaultLeaderID, JobResult{JobID: "j"}); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate: %v", err)
	}
	if d, _ := jrs.DirtyResults(ctx); len(d) != 1 {
		t.Fatalf("dirty %v", d)
	}
	if err := jrs.MarkResultAsClean(ctx, DefaultLeaderID, "j"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := jrs.HasCleanJobResultEntry(ctx, "j"); !ok {
		t.Fatal("not clean")
	}
	if r, err := jrs.GetJobResult(ctx, "j"); err != nil || r.State != "FINISHED" {
		t.Fatalf("GetJobResult = %+v, %v", r, err)
	}
	if _, err := jrs.GetJobResult(ctx, "k"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetJobResult of no job: %v", err)
	}

	b := s.BlobStore()
	if err := b.Put(ctx, "k", strings.NewReader("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, "k"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("void blob store: %v", err)
	}
}

func TestNewRejectsUnknownType(t *testing.T) {
	if _, err := New(context.Background(), Config{Type: "kubernetes"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v", err)
	}
}

func TestSessionIDRoundTrip(t *testing.T) {
	id := NewSessionID()
	got, err := ParseSessionID(id.String())
	if err != nil || got != id {
		t.Fatalf("%s -> %s, %v", id, got, err)
	}
	if DefaultLeaderID.String() != "00000000-0000-0000-0000-000000000000" {
		t.Fatal(DefaultLeaderID.String())
	}
	if _, err := ParseSessionID("nope"); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
}

func TestConfigFromConf(t *testing.T) {
	c := conf.NewConfiguration()
	for k, v := range map[string]string{
		"high-availability":                     "zookeeper",
		"high-availability.zookeeper.quorum":    "zk:2181",
		"high-availability.storageDir":          "file:///ha",
		"high-availability.cluster-id":          "/c1",
		"high-availability.zookeeper.path.root": "/r",
	} {
		if err := c.Set(k, v, conf.CodeSource); err != nil {
			t.Fatal(err)
		}
	}
	cfg := ConfigFromConf(c, zerolog.Nop())
	if cfg.Type != conf.HighAvailabilityZooKeeper || cfg.Quorum != "zk:2181" || cfg.StorageDir != "file:///ha" ||
		clusterPath(cfg.Root, cfg.ClusterID) != "/r/c1" || cfg.SessionTimeout.Seconds() != 4 {
		t.Fatalf("%+v", cfg)
	}
}
