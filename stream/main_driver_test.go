package stream_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/stream"
)

type fakeSubmitter struct{ graphs []*jobgraph.JobGraph }

func (f *fakeSubmitter) SubmitJob(_ context.Context, g *jobgraph.JobGraph) (string, error) {
	f.graphs = append(f.graphs, g)
	return "job-" + g.ProgramArgs[0], nil
}

func init() {
	stream.RegisterJob("driver-test-ok", func(env *stream.Environment, args []string) error {
		stream.FromElements(env, args...).Print()
		return nil
	})
	stream.RegisterJob("driver-test-sink", func(env *stream.Environment, args []string) error {
		stream.FromElements(env, "x").WriteAsText(args[0], stream.Overwrite)
		return nil
	})
	stream.RegisterJob("driver-test-bad", func(env *stream.Environment, args []string) error {
		return errors.New("bad arguments")
	})
}

func TestRunDriverSubmitsTheNamedJob(t *testing.T) {
	var sub fakeSubmitter
	var out bytes.Buffer
	if err := stream.RunDriver(context.Background(), []string{"driver-test-ok", "a", "b"}, &sub, "sha256:abc", &out); err != nil {
		t.Fatal(err)
	}
	if len(sub.graphs) != 1 {
		t.Fatalf("submitted %d graphs", len(sub.graphs))
	}
	g := sub.graphs[0]
	if g.BinaryKey != "sha256:abc" || !slices.Equal(g.ProgramArgs, []string{"driver-test-ok", "a", "b"}) || g.Fingerprint == "" {
		t.Errorf("graph: key %q, args %q, fingerprint %q", g.BinaryKey, g.ProgramArgs, g.Fingerprint)
	}
	if !strings.Contains(out.String(), `job "driver-test-ok" submitted as job-driver-test-ok`) {
		t.Errorf("driver printed %q", out.String())
	}
}

func TestRunDriverSubmitsNothingWhenABuilderFails(t *testing.T) {
	var sub fakeSubmitter
	err := stream.RunDriver(context.Background(), []string{"driver-test-bad"}, &sub, "sha256:abc", &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "bad arguments") || len(sub.graphs) != 0 {
		t.Fatalf("RunDriver = %v, submitted %d", err, len(sub.graphs))
	}
}

func TestDriverSubmitterNeedsTheJobManager(t *testing.T) {
	t.Setenv(stream.EnvDriverREST, "")
	if _, err := stream.DriverSubmitterFromEnv(); err == nil || !strings.Contains(err.Error(), "gofl run -m application") {
		t.Fatalf("DriverSubmitterFromEnv = %v", err)
	}
}

// Under high availability the driver's jobs get IDs fixed by the
// application ID, and a job the JobManager already has keeps its output.
func TestRunDriverWithFixedIDsAttachesToRecoveredJobs(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	part := filepath.Join(out, "part-0")
	if err := os.WriteFile(part, []byte("committed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := jobgraph.ApplicationJobID("/app", 0)
	var sub fakeSubmitter
	err := stream.RunDriverWithIDs(context.Background(), []string{"driver-test-sink", out}, &sub, "sha256:abc",
		stream.DriverIDs{ApplicationID: "/app", Recovered: []string{id}}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sub.graphs) != 1 || sub.graphs[0].JobID != id {
		t.Fatalf("submitted %d graphs, want one with the fixed ID %s", len(sub.graphs), id)
	}
	if _, err := os.Stat(part); err != nil {
		t.Fatalf("the recovered job's output was prepared again (Overwrite): %v", err)
	}
	// Not recovered: its output is prepared (removed with Overwrite).
	sub = fakeSubmitter{}
	if err := stream.RunDriverWithIDs(context.Background(), []string{"driver-test-sink", out}, &sub, "sha256:abc",
		stream.DriverIDs{ApplicationID: "/app"}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if sub.graphs[0].JobID != id {
		t.Fatalf("job ID %q, want %s", sub.graphs[0].JobID, id)
	}
	if _, err := os.Stat(part); !os.IsNotExist(err) {
		t.Fatalf("a new job's Overwrite output stayed: %v", err)
	}
}
