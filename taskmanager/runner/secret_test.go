package runner

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/internal/version"
	"github.com/gofl/gofl/rpc/pb"
)

// TestRunnerSocketIsPrivate: the runner's socket is 0600 in a 0700
// directory, and a caller without the secret the TaskManager passed is
// refused, while the TaskManager's own calls go through.
func TestRunnerSocketIsPrivate(t *testing.T) {
	dir := shortDir(t)
	p, err := Start(context.Background(), Spec{JobID: "job1", Binary: testRunner, Fingerprint: "fp1",
		Dir: dir, StartTimeout: startTimeout}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(2 * time.Second) })
	sock := filepath.Join(dir, "runner.sock")
	if st, err := os.Stat(sock); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket: %v %v", st.Mode(), err)
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Fatalf("job directory mode %v", st.Mode())
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	_, err = pb.NewJobRunnerServiceClient(conn).Handshake(ctx, &pb.RunnerHandshakeRequest{ProtocolVersion: version.ProtocolVersion, JobId: "job1"})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a caller without the runner secret got %v, want Unauthenticated", err)
	}
	// The TaskManager's client still works.
	_, ch := submit(t, p, 0, "noop", "")
	if got := names(states(t, ch, 3)); got != "INITIALIZING RUNNING FINISHED" {
		t.Fatalf("noop: %s", got)
	}
}
