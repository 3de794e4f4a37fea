package stream_test

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/stream"
)

type unserializable struct {
	N  int
	Fn func()
}

func init() {
	stream.RegisterJob("test-collect-unserializable", func(env *stream.Environment, _ []string) error {
		stream.Map(stream.FromElements(env, 1, 2, 3), func(n int) unserializable { return unserializable{N: n} }).Collect().Uid("u")
		return nil
	})
}

func TestCollectedValuesFindsSinksByUidOrName(t *testing.T) {
	env := stream.NewEnvironment(stream.WithParallelism(2))
	nums := stream.FromElements(env, 1, 2, 3, 4)
	nums.Collect().Uid("all")
	stream.Filter(nums, func(n int) bool { return n%2 == 0 }).Collect().Name("Evens")
	stream.Map(nums, func(n int) string { return strings.Repeat("x", n) }).Collect().Name("Evens")
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	all, err := stream.CollectedValues[int](env, "all")
	sort.Ints(all)
	if err != nil || len(all) != 4 || all[0] != 1 || all[3] != 4 {
		t.Fatalf("all = %v, %v", all, err)
	}
	for _, c := range []struct{ name, want string }{
		{"Evens", "2 Collect sinks named"},
		{"nope", `no Collect sink with uid or name "nope"`},
	} {
		if _, err := stream.CollectedValues[int](env, c.name); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := stream.CollectedValues[string](env, "all"); err == nil || !strings.Contains(err.Error(), "*stream.Collected[int], not a *Collected[string]") {
		t.Errorf("wrong type: %v", err)
	}
}

// unreachable is a client whose every request would fail: ExecuteOn must
// reject what it can before it talks to the cluster.
func unreachable(t *testing.T) *client.Client {
	c, err := client.New("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestExecuteOnRejectsBeforeSubmitting(t *testing.T) {
	env := stream.NewEnvironment()
	stream.FromElements(env, 1).Collect()
	if _, err := env.ExecuteOn(context.Background(), unreachable(t)); err == nil || !strings.Contains(err.Error(), "needs an environment from BuildJob") {
		t.Errorf("environment not from BuildJob: %v", err)
	}

	env, err := stream.BuildJob("test-collect-unserializable", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = env.ExecuteOn(context.Background(), unreachable(t))
	if err == nil || !strings.Contains(err.Error(), "cannot be serialized to return to the client") || strings.Contains(err.Error(), "reach") {
		t.Errorf("unserializable collect: %v", err)
	}
	// Locally the same job collects: nothing crosses a process.
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	if vs, err := stream.CollectedValues[unserializable](env, "u"); err != nil || len(vs) != 3 {
		t.Errorf("local collect: %v, %v", vs, err)
	}
}

func TestCountCollectedRejectsCorruptLists(t *testing.T) {
	for _, b := range [][]byte{{5, 1, 2}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, {0x80}} {
		if n, err := stream.CountCollected(b); err == nil {
			t.Errorf("%x: %d records, no error", b, n)
		}
	}
	if n, err := stream.CountCollected([]byte{1, 'a', 0, 2, 'b', 'c'}); err != nil || n != 3 {
		t.Errorf("valid list: %d, %v", n, err)
	}
}
