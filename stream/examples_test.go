package stream_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/gofl/gofl/examples/keyed-join/keyedjoin"
	"github.com/gofl/gofl/examples/windowed-count/windowedcount"
	"github.com/gofl/gofl/stream"
)

// runExample builds a registered-style job builder with args into a new
// environment, executes it locally and returns the lines of every part
// file, per file.
func runExample(t *testing.T, build stream.Builder, args ...string) map[string][]string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "out")
	env := stream.NewEnvironment()
	if err := build(env, append(args, "--output", dir)); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "part-*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no part files in %s: %v", dir, err)
	}
	parts := map[string][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if s := strings.TrimSuffix(string(b), "\n"); s != "" {
			parts[filepath.Base(f)] = strings.Split(s, "\n")
		}
	}
	return parts
}

func allLines(parts map[string][]string) []string {
	var all []string
	for _, l := range parts {
		all = append(all, l...)
	}
	sort.Strings(all)
	return all
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// expectedWindowCounts replays the events in generation order (one source
// subtask) with the semantics of BoundedOutOfOrderness and tumbling
// event-time windows: the watermark before event i is the largest earlier
// timestamp minus the bound minus 1 ms; an event whose window ends at or
// before it (window MaxTimestamp <= watermark) is dropped.
func expectedWindowCounts(c windowedcount.Config, dropLate bool) (lines []string, dropped []int64, outOfOrder int) {
	size, bound := c.Window.Milliseconds(), c.OutOfOrderness.Milliseconds()
	type kw struct {
		key   string
		start int64
	}
	counts := map[kw]int64{}
	var maxTs int64
	for i := int64(0); i < c.Events; i++ {
		e := c.EventAt(i)
		start := floorDiv(e.Ts, size) * size
		if i > 0 && e.Ts < maxTs {
			outOfOrder++
		}
		if dropLate && i > 0 && start+size-1 <= maxTs-bound-1 {
			dropped = append(dropped, i)
		} else {
			counts[kw{e.Key, start}]++
		}
		if i == 0 || e.Ts > maxTs {
			maxTs = e.Ts
		}
	}
	for k, n := range counts {
		lines = append(lines, fmt.Sprintf("%s %d %d %d", k.key, k.start, k.start+size, n))
	}
	sort.Strings(lines)
	return lines, dropped, outOfOrder
}

func TestWindowedCountExample(t *testing.T) {
	c := windowedcount.DefaultConfig()
	c.Events = 6000
	want, dropped, outOfOrder := expectedWindowCounts(c, true)

	// The data must exercise what the example is about: out-of-order events
	// within the bound (all counted), and events later than the bound of
	// which some still find their window open and the others are dropped.
	var late []int64
	for i := int64(0); i < c.Events; i++ {
		if c.Delay(i) > c.OutOfOrderness {
			late = append(late, i)
		}
	}
	if outOfOrder < 1000 || len(dropped) == 0 || len(dropped) >= len(late) {
		t.Fatalf("test data: %d out-of-order events, %d beyond the bound, %d of them dropped", outOfOrder, len(late), len(dropped))
	}
	for _, i := range dropped {
		if c.Delay(i) <= c.OutOfOrderness {
			t.Fatalf("event %d within the bound (delay %v) expected to be dropped", i, c.Delay(i))
		}
	}
	counted := int64(0)
	for _, l := range want {
		f := strings.Fields(l)
		n, _ := strconv.ParseInt(f[3], 10, 64)
		counted += n
	}
	if counted != c.Events-int64(len(dropped)) {
		t.Fatalf("expected windows count %d events, want %d - %d dropped", counted, c.Events, len(dropped))
	}
	t.Logf("%d events, %d out of order, %d beyond the %v bound, %d dropped (indexes %v...), %d windows",
		c.Events, outOfOrder, len(late), c.OutOfOrderness, len(dropped), dropped[:min(5, len(dropped))], len(want))

	for _, p := range []int{1, 3} {
		got := allLines(runExample(t, windowedcount.Job, "--events", fmt.Sprint(c.Events), "--parallelism", fmt.Sprint(p)))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("p=%d: %d window lines, want %d; diff: %s", p, len(got), len(want), diffLines(got, want))
		}
	}

	// Parallel sources with no events beyond the bound: each source subtask
	// has its own watermark, the window takes their minimum, and nothing is
	// dropped.
	c.LateEvery = 0
	want, dropped, _ = expectedWindowCounts(c, false)
	if len(dropped) != 0 {
		t.Fatal("dropped with late events off")
	}
	got := allLines(runExample(t, windowedcount.Job, "--events", fmt.Sprint(c.Events), "--parallelism", "3",
		"--source-parallelism", "3", "--late-every", "0"))
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parallel sources: %d window lines, want %d; diff: %s", len(got), len(want), diffLines(got, want))
	}
}

// expectedTotals joins every order with the payments in the same tumbling
// window and applies each user's payments in (payment time, order id,
// method) order; the lines per user in that order.
func expectedTotals(c keyedjoin.Config) (perUser map[string][]string, joined, unjoined int) {
	size := c.Window.Milliseconds()
	var paid []keyedjoin.Paid
	for i := int64(0); i < c.Orders; i++ {
		o := c.OrderAt(i)
		for _, p := range c.PaymentsFor(i) {
			if floorDiv(p.Ts, size) != floorDiv(o.Ts, size) {
				unjoined++
				continue
			}
			paid = append(paid, keyedjoin.Paid{User: o.User, OrderID: o.ID, Method: p.Method, Amount: p.Amount, PaidTs: p.Ts})
		}
	}
	sort.Slice(paid, func(i, j int) bool {
		a, b := paid[i], paid[j]
		if a.PaidTs != b.PaidTs {
			return a.PaidTs < b.PaidTs
		}
		if a.OrderID != b.OrderID {
			return a.OrderID < b.OrderID
		}
		return a.Method < b.Method
	})
	totals := map[string]int64{}
	perUser = map[string][]string{}
	for _, p := range paid {
		totals[p.User] += p.Amount
		perUser[p.User] = append(perUser[p.User], fmt.Sprintf("%s %d %d %s %d %d", p.User, p.PaidTs, p.OrderID, p.Method, p.Amount, totals[p.User]))
	}
	return perUser, len(paid), unjoined
}

func TestKeyedJoinExample(t *testing.T) {
	c := keyedjoin.DefaultConfig()
	c.Orders = 3000
	wantPerUser, joined, unjoined := expectedTotals(c)
	if len(wantPerUser) != c.Users || unjoined == 0 || joined < int(c.Orders)/2 {
		t.Fatalf("test data: %d users, %d joined pairs, %d payments in another window than their order", len(wantPerUser), joined, unjoined)
	}
	var want []string
	for _, l := range wantPerUser {
		want = append(want, l...)
	}
	sort.Strings(want)
	t.Logf("%d orders, %d joined pairs, %d payments outside their order's window", c.Orders, joined, unjoined)

	for _, p := range []int{1, 3} {
		parts := runExample(t, keyedjoin.Job, "--orders", fmt.Sprint(c.Orders), "--parallelism", fmt.Sprint(p))
		if got := allLines(parts); !reflect.DeepEqual(got, want) {
			t.Fatalf("p=%d: %d lines, want %d; diff: %s", p, len(got), len(want), diffLines(got, want))
		}
		// Each user's updates are written by one sink subtask, in order.
		for name, lines := range parts {
			perUser := map[string][]string{}
			for _, l := range lines {
				u := strings.Fields(l)[0]
				perUser[u] = append(perUser[u], l)
			}
			for u, ls := range perUser {
				if !reflect.DeepEqual(ls, wantPerUser[u]) {
					t.Fatalf("p=%d: %s: %s's %d updates are not the expected sequence of %d", p, name, u, len(ls), len(wantPerUser[u]))
				}
			}
		}
	}
}

// diffLines describes the first few lines only in got or only in want.
func diffLines(got, want []string) string {
	in := func(l []string) map[string]int {
		m := map[string]int{}
		for _, s := range l {
			m[s]++
		}
		return m
	}
	g, w := in(got), in(want)
	var d []string
	for s, n := range g {
		if w[s] < n {
			d = append(d, "+"+s)
		}
	}
	for s, n := range w {
		if g[s] < n {
			d = append(d, "-"+s)
		}
	}
	sort.Strings(d)
	if len(d) > 10 {
		d = append(d[:10], fmt.Sprintf("... (%d in all)", len(d)))
	}
	return strings.Join(d, "; ")
}
