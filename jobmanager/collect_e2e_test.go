package jobmanager_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/rpc/restapi"
	"github.com/gofl/gofl/stream"
)

// Jobs of this test binary, which is its own job binary: TestMain calls
// stream.ServeRole, so the TaskManagers' runners are this program too.
func init() {
	stream.RegisterJob("collect-sums", buildCollectSums)
	stream.RegisterJob("collect-too-much", buildCollectTooMuch)
	stream.RegisterJob("collect-unbounded", func(env *stream.Environment, _ []string) error {
		stream.Generate(env, -1, func(i int64) int64 { return i }, stream.RateLimit(1000)).Collect()
		return nil
	})
}

// keySum is a running sum per key.
type keySum struct {
	Key, Sum, Count int64
	Label           string
}

// collectSums: --n numbers keyed by n mod --keys, summed per key in Batch
// mode into one Collect sink; the multiples of 1000 into a second one at
// parallelism 2. With --fail-marker PATH, the first subtask to see 5000
// fails once (when PATH does not exist yet, creating it).
func buildCollectSums(env *stream.Environment, args []string) error {
	fs := flag.NewFlagSet("collect-sums", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	n := fs.Int64("n", 20000, "numbers")
	keys := fs.Int64("keys", 50, "keys")
	marker := fs.String("fail-marker", "", "fail once unless this file exists")
	if err := fs.Parse(args); err != nil {
		return err
	}
	env.SetRuntimeMode(stream.Batch)
	k, m := *keys, *marker
	nums := stream.FlatMap(stream.Generate(env, *n, func(i int64) int64 { return i }).Rebalance(),
		func(v int64, out stream.Collector[int64]) error {
			if v == 5000 && m != "" {
				if _, err := os.Stat(m); errors.Is(err, os.ErrNotExist) {
					if err := os.WriteFile(m, nil, 0o644); err != nil {
						return err
					}
					return errors.New("deliberate failure before the collect sink")
				}
			}
			out.Collect(v)
			return nil
		}).Name("Fail once")
	sums := stream.KeyBy(stream.Map(nums, func(v int64) keySum { return keySum{Key: v % k, Sum: v, Count: 1} }), func(s keySum) int64 { return s.Key }).
		Reduce(func(a, b keySum) keySum { return keySum{Key: a.Key, Sum: a.Sum + b.Sum, Count: a.Count + b.Count} })
	stream.Map(sums, func(s keySum) keySum { s.Label = fmt.Sprintf("κey-%d", s.Key); return s }).Collect().Name("Sums").Uid("sums")
	stream.Filter(nums, func(v int64) bool { return v%1000 == 0 }).Collect().Name("Thousands").Uid("thousands").SetParallelism(2)
	return nil
}

// collectTooMuch collects 3000 records of 1 KiB in one subtask: more than
// a task may return.
func buildCollectTooMuch(env *stream.Environment, _ []string) error {
	stream.Generate(env, 3000, func(i int64) string { return fmt.Sprintf("%01024d", i) }).Collect()
	return nil
}

func collected[T any](t *testing.T, env *stream.Environment, uid string) []T {
	t.Helper()
	vs, err := stream.CollectedValues[T](env, uid)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

func TestCollectOnCluster(t *testing.T) {
	parallel(t)
	c := newCluster(t, map[string]string{"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": "100 ms"})
	c.startTaskManager("tm-a", 2)
	c.startTaskManager("tm-b", 2)
	c.waitForTaskManagers(2)

	const n, keys = 20000, 50
	wantSums := make([]keySum, keys)
	for v := int64(0); v < n; v++ {
		s := &wantSums[v%keys]
		s.Key, s.Sum, s.Count, s.Label = v%keys, s.Sum+v, s.Count+1, fmt.Sprintf("κey-%d", v%keys)
	}
	var wantThousands []int64
	for v := int64(0); v < n; v += 1000 {
		wantThousands = append(wantThousands, v)
	}

	for _, tc := range []struct {
		name     string
		args     []string
		restarts bool
	}{
		{"exact results from 4 subtasks", nil, false},
		{"a failover returns no duplicates", []string{"--fail-marker", t.TempDir() + "/failed"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, err := stream.BuildJob("collect-sums", append([]string{"--n", fmt.Sprint(n), "--keys", fmt.Sprint(keys)}, tc.args...), stream.WithParallelism(4))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			res, err := env.ExecuteOn(ctx, c.client)
			if err != nil {
				t.Fatal(err)
			}
			got := collected[keySum](t, env, "sums")
			sort.Slice(got, func(i, j int) bool { return got[i].Key < got[j].Key })
			if !reflect.DeepEqual(got, wantSums) {
				t.Fatalf("sums: got %d records %v..., want %d", len(got), got[:min(len(got), 3)], len(wantSums))
			}
			th := collected[int64](t, env, "thousands")
			sort.Slice(th, func(i, j int) bool { return th[i] < th[j] })
			if !reflect.DeepEqual(th, wantThousands) {
				t.Fatalf("thousands: got %v, want %v", th, wantThousands)
			}

			// The REST view of the same result: Flink's shape, two
			// accumulators, one per Collect sink.
			r, err := c.client.JobExecutionResult(c.ctx, res.JobID)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status.ID != restapi.ResultCompleted || r.ExecutionResult.ApplicationStatus != "SUCCEEDED" || len(r.ExecutionResult.AccumulatorResults) != 2 {
				t.Fatalf("execution result: %+v", r)
			}
			for name, b := range r.ExecutionResult.AccumulatorResults {
				if k, err := stream.CountCollected(b); err != nil || (k != keys && k != len(wantThousands)) {
					t.Errorf("accumulator %s: %d records, %v", name, k, err)
				}
			}
			ex, err := c.client.JobExceptions(c.ctx, res.JobID)
			if err != nil {
				t.Fatal(err)
			}
			if failures := len(ex.ExceptionHistory.Entries); (failures > 0) != tc.restarts {
				t.Fatalf("%d failures, want restarts=%v: %+v", failures, tc.restarts, ex.ExceptionHistory.Entries)
			}
			if tc.restarts && !strings.Contains(ex.RootException, "deliberate failure") {
				t.Fatalf("root exception: %s", ex.RootException)
			}
		})
	}

	t.Run("results over the limit fail the job without restarts", func(t *testing.T) {
		env, err := stream.BuildJob("collect-too-much", nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		res, err := env.ExecuteOn(ctx, c.client)
		if err == nil || !strings.Contains(err.Error(), "accumulator results too large") || !strings.Contains(err.Error(), "FAILED") ||
			!strings.Contains(err.Error(), `collect sink "Collect Sink"`) || !strings.Contains(err.Error(), "file sink") {
			t.Fatalf("ExecuteOn: %v", err)
		}
		ex, err := c.client.JobExceptions(c.ctx, res.JobID)
		if err != nil {
			t.Fatal(err)
		}
		if len(ex.ExceptionHistory.Entries) != 1 || ex.ExceptionHistory.Entries[0].FailureType != "non-recoverable" {
			t.Fatalf("want one non-recoverable failure: %+v", ex.ExceptionHistory.Entries)
		}
	})

	t.Run("a context that ends cancels the job", func(t *testing.T) {
		env, err := stream.BuildJob("collect-unbounded", nil)
		if err != nil {
			t.Fatal(err)
		}
		// The context ends once every task of the job runs (not after a
		// fixed time, in which a loaded machine might not even have
		// submitted it).
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		running := make(chan string, 1)
		go func() {
			defer cancel()
			for ctx.Err() == nil {
				if jobs, err := c.client.JobsOverview(ctx); err == nil {
					for _, j := range jobs.Jobs {
						if j.Name == "collect-unbounded" && j.State == "RUNNING" && j.Tasks.Total > 0 && j.Tasks.Running == j.Tasks.Total {
							running <- j.ID
							return
						}
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		if _, err := env.ExecuteOn(ctx, c.client); !errors.Is(err, context.Canceled) {
			t.Fatalf("ExecuteOn: %v", err)
		}
		var id string
		select {
		case id = <-running:
		default:
			t.Fatal("ExecuteOn ended before the job ran")
		}
		// Not c.waitFor: that fails the parent test.
		wctx, wcancel := context.WithTimeout(context.Background(), waitLimit)
		defer wcancel()
		if d, err := c.client.WaitForJobStatus(wctx, id, "CANCELED"); err != nil {
			t.Fatalf("job %s: %v (state %s)", id, err, d.State)
		}
	})
}
