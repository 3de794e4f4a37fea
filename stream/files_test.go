package stream_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gofl/gofl/stream"
)

func TestUnsupportedFileSystemsFailThePlan(t *testing.T) {
	for _, c := range []struct {
		build func(env *stream.Environment)
		want  string
	}{
		{func(env *stream.Environment) { stream.TextFile(env, "s3://bucket/in").Print() }, `TextFile: file system scheme "s3"`},
		{func(env *stream.Environment) { stream.FromElements(env, 1).WriteAsText("gs://bucket/out") }, `WriteAsText: file system scheme "gs"`},
	} {
		env := stream.NewEnvironment()
		c.build(env)
		if _, err := env.Plan(); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "want a path, file:// or hdfs://") {
			t.Errorf("Plan: %v, want %q", err, c.want)
		}
	}
}

// An existing, non-empty output directory fails the job before it runs
// (Flink's WriteMode.NO_OVERWRITE), so a run at parallelism 1 after one at 3
// cannot leave part-1 and part-2 next to its part-0; with Overwrite the
// directory is replaced. file:// URIs and plain paths name the same files.
func TestWriteAsTextRefusesAnExistingDirectoryUnlessOverwrite(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"part-0", "part-1", "part-2"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("left over by an earlier run\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := stream.NewEnvironment()
	stream.FromElements(env, "a", "b").WriteAsText(dir)
	if _, err := env.Execute(context.Background()); !errors.Is(err, stream.ErrOutputExists) || !strings.Contains(err.Error(), "Overwrite") {
		t.Fatalf("Execute into a non-empty directory: %v, want ErrOutputExists naming Overwrite", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "part-0")); string(b) != "left over by an earlier run\n" {
		t.Fatalf("the refused job touched part-0: %q", b)
	}

	env = stream.NewEnvironment()
	stream.FromElements(env, "a", "b").WriteAsText("file://"+dir, stream.Overwrite)
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "part-0"))
	if err != nil || string(b) != "a\nb\n" {
		t.Fatalf("part-0 = %q, %v", b, err)
	}
	for _, f := range []string{"part-1", "part-2"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("stale %s survived the overwrite: %v", f, err)
		}
	}

	// An empty existing directory is fine without Overwrite.
	empty := t.TempDir()
	env = stream.NewEnvironment()
	stream.FromElements(env, "c").WriteAsText(empty)
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatalf("Execute into an empty directory: %v", err)
	}

	env = stream.NewEnvironment(stream.WithParallelism(2))
	lines := stream.TextFile(env, dir).Collect()
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := lines.Values(); len(got) != 2 {
		t.Fatalf("read back %q", got)
	}
}
