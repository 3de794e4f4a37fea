package stream_test

import (
	"context"
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

// A part file an earlier attempt left is replaced, not appended to or
// refused; file:// URIs and plain paths name the same files.
func TestWriteAsTextReplacesLeftoverPartFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "part-0"), []byte("left over by a failed attempt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := stream.NewEnvironment()
	stream.FromElements(env, "a", "b").WriteAsText("file://" + dir)
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "part-0"))
	if err != nil || string(b) != "a\nb\n" {
		t.Fatalf("part-0 = %q, %v", b, err)
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
