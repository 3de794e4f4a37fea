package taskmanager

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/internal/blob"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/storage"
	"github.com/gofl/gofl/taskmanager/runner"
)

// stallingBlobService serves one blob in two chunks and holds the second
// until the test releases it, so a download can be caught half-way.
type stallingBlobService struct {
	pb.UnimplementedBlobServiceServer
	data     []byte
	halfSent chan struct{} // one value per download that sent its first chunk
	release  chan struct{}
}

func (s *stallingBlobService) GetBlobByKey(req *pb.GetBlobByKeyRequest, stream pb.BlobService_GetBlobByKeyServer) error {
	half := len(s.data) / 2
	if err := stream.Send(&pb.BlobChunk{Data: s.data[:half]}); err != nil {
		return err
	}
	s.halfSent <- struct{}{}
	select {
	case <-s.release:
	case <-stream.Context().Done():
		return stream.Context().Err()
	}
	return stream.Send(&pb.BlobChunk{Data: s.data[half:]})
}

// A TaskManager fetches a job binary once for all the tasks that need it.
// The first task giving up (its deployment cancelled) must not fail the
// download the others wait on: it runs on neither that task's context nor
// its connection.
func TestJobBinaryDownloadOutlivesTheFirstWaiter(t *testing.T) {
	data := bytes.Repeat([]byte("job binary "), 100_000)
	key := blob.KeyOf(data)
	svc := &stallingBlobService{data: data, halfSent: make(chan struct{}, 10), release: make(chan struct{})}
	addr, _ := serve(t, "127.0.0.1:0", func(s *grpc.Server) { pb.RegisterBlobServiceServer(s, svc) })
	dial := func(a string) (*grpc.ClientConn, error) {
		return grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	pool, err := newRunnerPool(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	pool.dial = dial
	defer pool.close()

	type result struct {
		path string
		err  error
	}
	firstCtx, cancelFirst := context.WithCancel(context.Background())
	defer cancelFirst()
	first := make(chan result, 1)
	go func() {
		p, err := pool.fetchBinary(firstCtx, addr, key)
		first <- result{p, err}
	}()
	recv(t, svc.halfSent, "the download to start")
	second := make(chan result, 1)
	go func() {
		p, err := pool.fetchBinary(context.Background(), addr, key)
		second <- result{p, err}
	}()
	// The second caller joins the download in flight rather than starting
	// its own: wait until it is counted as a waiter.
	eventually(t, "the second caller to wait on the shared download", func() bool { return pool.cache.Waiters(key) == 2 })

	cancelFirst()
	if r := recv(t, first, "the first caller to give up"); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("first caller: %q, %v; want context.Canceled", r.path, r.err)
	}
	close(svc.release)
	r := recv(t, second, "the second caller's binary")
	if r.err != nil {
		t.Fatalf("second caller: %v", r.err)
	}
	got, err := os.ReadFile(r.path)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("fetched binary: %d bytes, %v; want %d bytes", len(got), err, len(data))
	}
	select {
	case <-svc.halfSent:
		t.Fatal("the binary was downloaded twice")
	default:
	}
}

// A job binary in the staging blob cache on this host's disk (a per-job
// cluster on the local provider) is linked, not fetched from the
// JobManager; a corrupt one is not used, the JobManager's copy is.
func TestJobBinaryLinkedFromLocalStaging(t *testing.T) {
	data, key, staged, pool := stagedBinaryPool(t)
	defer pool.close()
	p, err := pool.fetchBinary(context.Background(), "127.0.0.1:1", key)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.Stat(staged)
	b, err := os.Stat(p)
	if err != nil || !os.SameFile(a, b) || b.Mode().Perm()&0o100 == 0 {
		t.Fatalf("binary %s: %v, %v; want the staged file linked, executable", p, b, err)
	}

	// Corrupt in the staging cache: fetched from the JobManager instead.
	bad := bytes.Repeat([]byte("other binary "), 10_000)
	badKey := blob.KeyOf(bad)
	stagedBad, _ := storage.LocalBlobPath(pool.stagingDir, badKey)
	if err := os.WriteFile(stagedBad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	svc := &stallingBlobService{data: bad, halfSent: make(chan struct{}, 10), release: make(chan struct{})}
	close(svc.release)
	addr, _ := serve(t, "127.0.0.1:0", func(s *grpc.Server) { pb.RegisterBlobServiceServer(s, svc) })
	pool.dial = func(a string) (*grpc.ClientConn, error) {
		return grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	p, err = pool.fetchBinary(context.Background(), addr, badKey)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, bad) {
		t.Fatalf("fetched binary: %d bytes, %v; want the JobManager's", len(got), err)
	}
}

// A per-job cluster's TaskManager links its job's staged binary before any
// task asks (prelink); a task arriving meanwhile waits for that link rather
// than reading the binary again, and gets the same file without asking the
// JobManager.
func TestJobBinaryPrelinked(t *testing.T) {
	_, key, staged, pool := stagedBinaryPool(t)
	defer pool.close()
	pool.prelink(key)
	p, err := pool.fetchBinary(context.Background(), "127.0.0.1:1", key) // during or after the prelink
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.Stat(staged)
	if b, err := os.Stat(p); err != nil || !os.SameFile(a, b) {
		t.Fatalf("binary %s: %v, %v; want the staged file linked", p, b, err)
	}
	pool.mu.Lock()
	inflight := len(pool.linking)
	pool.mu.Unlock()
	if inflight != 0 {
		t.Fatalf("%d links still recorded in flight after the binary is there", inflight)
	}
}

// stagedJobBinary names the key only for per-job and application clusters.
func TestStagedJobBinaryKey(t *testing.T) {
	key := blob.KeyOf([]byte("x"))
	uri := "file:///home/u/.gofl/blobs/sha256/" + key[len("sha256:"):]
	for _, tc := range []struct {
		mode, uri, want string
	}{
		{conf.ModePerJob, uri, key},
		{conf.ModeApplication, uri, key},
		{conf.ModeSession, uri, ""},
		{conf.ModePerJob, "file:///tmp/wordcount", ""},
	} {
		c, _, err := conf.Load(conf.LoadOptions{Env: []string{}, Dynamic: []string{
			conf.DeploymentMode.Key() + "=" + tc.mode, conf.DeploymentJobBinary.Key() + "=" + tc.uri}})
		if err != nil {
			t.Fatal(err)
		}
		if got := ConfigFromConf(c).JobBinary; got != tc.want {
			t.Errorf("%s %s: JobBinary %q, want %q", tc.mode, tc.uri, got, tc.want)
		}
	}
}

// stagedBinaryPool writes a job binary into a staging blob cache on this
// host's disk and returns it, its key, its staged path and a runner pool
// that links from that cache and cannot reach a JobManager.
func stagedBinaryPool(t *testing.T) (data []byte, key, staged string, pool *runnerPool) {
	t.Helper()
	data = bytes.Repeat([]byte("staged binary "), 10_000)
	key, staged, pool = stagedPool(t, data)
	return data, key, staged, pool
}

// stagedPool is stagedBinaryPool for the job binary data.
func stagedPool(t *testing.T, data []byte) (key, staged string, pool *runnerPool) {
	t.Helper()
	key = blob.KeyOf(data)
	staging := t.TempDir()
	staged, ok := storage.LocalBlobPath(staging, key)
	if !ok {
		t.Fatal("no local path for the staged blob")
	}
	if err := os.MkdirAll(filepath.Dir(staged), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(staged, data, 0o644); err != nil {
		t.Fatal(err)
	}
	pool, err := newRunnerPool(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	pool.stagingDir = staging
	pool.dial = func(string) (*grpc.ClientConn, error) { return nil, errors.New("no JobManager in this test") }
	return key, staged, pool
}

// A per-job cluster's TaskManager starts the job's runner ahead of the
// first task, from the staged JobGraph: a task with that job information
// gets that runner; one with other information (the JobMaster changed
// the job's configuration) gets a new one, and the early one stops.
func TestRunnerStartedAhead(t *testing.T) {
	bin, err := os.ReadFile(testRunner)
	if err != nil {
		t.Fatal(err)
	}
	key, _, pool := stagedPool(t, bin)
	defer pool.close()
	pool.rpcTimeout = 30 * time.Second
	pool.listen = func() (*net.TCPListener, string, error) { return nil, "", errors.New("no data port in this test") }
	lost := make(chan uint64, 2)
	pool.onLost = func(_ string, id uint64, _ error) { lost <- id }
	g := &pb.JobGraph{JobId: "job1", Name: "ahead", Config: map[string]string{"k": "v"}}
	b, err := proto.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	graph := filepath.Join(t.TempDir(), "jobgraph.pb")
	if err := os.WriteFile(graph, b, 0o644); err != nil {
		t.Fatal(err)
	}
	pool.prestart("file://"+graph, key)
	var ahead *runner.Process
	for deadline := time.Now().Add(30 * time.Second); ahead == nil; {
		if time.Now().After(deadline) {
			t.Fatal("no runner started ahead within 30 s")
		}
		ahead = pool.running("job1")
		runtime.Gosched()
	}
	jr, err := pool.job("job1")
	if err != nil {
		t.Fatal(err)
	}
	info := &pb.JobInformation{JobId: "job1", JobName: "ahead", Config: map[string]string{"k": "v"}, JobBinaryKey: key}
	got, _, err := pool.get(context.Background(), jr, "127.0.0.1:1", info)
	if err != nil || got != ahead {
		t.Fatalf("get with the staged job information: %p, %v; want the runner started ahead %p", got, err, ahead)
	}

	// Started again ahead, then a task with other information.
	pool.mu.Lock()
	jr.cur.ahead = proto.Clone(info).(*pb.JobInformation)
	pool.mu.Unlock()
	other := proto.Clone(info).(*pb.JobInformation)
	other.Config["k"] = "changed"
	got, _, err = pool.get(context.Background(), jr, "127.0.0.1:1", other)
	if err != nil || got == ahead {
		t.Fatalf("get with other job information: %p, %v; want a new runner", got, err)
	}
	select {
	case <-ahead.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("the runner started ahead still runs after it was replaced")
	}
	pool.close()
	if len(lost) > 0 {
		t.Fatalf("runner %d reported lost; a replaced or closed runner is not", <-lost)
	}
}
