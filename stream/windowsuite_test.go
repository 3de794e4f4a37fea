package stream_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/gofl/gofl/internal/windowsuite"
	"github.com/gofl/gofl/stream"
)

// The window suite (session, global, count windows; custom, count and
// purging triggers; count, delta evictors; allowed lateness with a late
// data side output; a process function's side output) against its
// reference computation, in the local executor.
func TestWindowSuiteLocal(t *testing.T) {
	events := windowsuite.Events(3000)
	want := windowsuite.Expected(events)
	kinds := map[string]int{}
	for _, l := range want {
		kinds[l[:strings.IndexByte(l, '|')]]++
	}
	for _, k := range []string{"tumble", "late", "session", "count", "slide", "custom", "delta", "procsession", "side"} {
		if kinds[k] == 0 {
			t.Fatalf("the reference has no %q results: the suite does not exercise it (%v)", k, kinds)
		}
	}
	t.Logf("reference results per pipeline: %v", kinds)
	for _, p := range []int{1, 3} {
		t.Run(fmt.Sprintf("p%d", p), func(t *testing.T) {
			env := stream.NewEnvironment(stream.WithParallelism(p))
			res := windowsuite.Build(env, events).Collect()
			if _, err := env.Execute(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := res.Values()
			sort.Strings(got)
			if diff := diffMultiset(got, want); diff != "" {
				t.Fatalf("results differ from the reference:\n%s", diff)
			}
		})
	}
}

// diffMultiset lists the lines only in got or only in want (as multisets).
func diffMultiset(got, want []string) string {
	n := map[string]int{}
	for _, l := range got {
		n[l]++
	}
	for _, l := range want {
		n[l]--
	}
	var b strings.Builder
	var keys []string
	for l, c := range n {
		if c != 0 {
			keys = append(keys, l)
		}
	}
	sort.Strings(keys)
	for i, l := range keys {
		if i == 40 {
			fmt.Fprintf(&b, "... %d more\n", len(keys)-40)
			break
		}
		if n[l] > 0 {
			fmt.Fprintf(&b, "+%d %s\n", n[l], l)
		} else {
			fmt.Fprintf(&b, "%d %s\n", n[l], l)
		}
	}
	return b.String()
}
