package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/rpc/restapi"
)

// progressInput is the known input of the jobs the progress tests follow:
// the source reads progressInput records in 4 splits, the last vertex
// takes them all in.
const progressInput = 123456

// playBoundedJob plays a bounded job on c's fake Dispatcher once it is
// submitted: half its input read (2 of 4 splits) for at least
// `halfPolls` polls of the job by the CLI, then all of it, FINISHED.
// It returns the job's graph once submitted.
func playBoundedJob(t *testing.T, c *cluster, halfPolls int) <-chan *jobgraph.JobGraph {
	t.Helper()
	graph := make(chan *jobgraph.JobGraph, 1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(stop); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		wait := func(cond func() bool) bool {
			for !cond() {
				select {
				case <-stop:
					return false
				case <-time.After(20 * time.Millisecond):
				}
			}
			return true
		}
		var id string
		if !wait(func() bool {
			l, err := c.d.ListJobs(context.Background())
			if err == nil && len(l.Jobs) == 1 {
				id = l.Jobs[0].ID
			}
			return id != ""
		}) {
			return
		}
		g := c.d.Graph(id)
		last := len(g.Vertices) - 1
		set := func(n, splits int64) {
			c.d.SetVertexIO(id, 0, restapi.IOMetricsInfo{WriteRecords: n}, &restapi.SourceProgress{Unit: "splits", Done: splits, Total: 4})
			for i := 1; i <= last; i++ {
				m := restapi.IOMetricsInfo{ReadRecords: n}
				if i < last {
					m.WriteRecords = n
				}
				c.d.SetVertexIO(id, i, m, nil)
			}
		}
		set(progressInput/2, 2)
		c.d.SetState(id, "RUNNING")
		graph <- g
		from := c.d.DetailsServed(id)
		if !wait(func() bool { return c.d.DetailsServed(id) >= from+halfPolls }) {
			return
		}
		set(progressInput, 4)
		c.d.SetState(id, "FINISHED")
	}()
	return graph
}

// A run on a terminal (a pty) draws each vertex's records and rates in
// place, with the source's progress bar, and ends with the final counts
// and 100%.
func TestRunProgressOnATerminal(t *testing.T) {
	bin := buildWordcount(t)
	c := newBlobCluster(t)
	// 15 polls (100 ms apart at least) span several 250 ms redraws.
	graph := playBoundedJob(t, c, 15)
	tty, screen := terminal(t)
	var stderr bytes.Buffer
	code := run([]string{"gofl", "run", "-m", c.addr, "-p", "2", bin, "--input", "/in", "--output", "/out"}, tty, &stderr, func() []string { return []string{} })
	out := screen()
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr.String())
	}
	t.Logf("the terminal got:\n%q", out)
	g := <-graph
	if !strings.Contains(out, "\x1b[2K") || !regexp.MustCompile(`\x1b\[\d+A`).MatchString(out) {
		t.Errorf("no in-place redraw (ANSI) on a terminal:\n%q", out)
	}
	src, sink := g.Vertices[0].Name, g.Vertices[len(g.Vertices)-1].Name
	half := regexp.MustCompile(regexp.QuoteMeta(src) + ` +RUNNING +in 0.* +out 61,728.*\[#{12}-{12}\]  50% 2/4 splits`)
	if !half.MatchString(out) {
		t.Errorf("no progress line of %q at 2/4 splits:\n%s", src, out)
	}
	// The final block: the full input, 100%, on the last lines.
	tail := out[strings.LastIndex(out, "FINISHED |"):]
	for _, re := range []string{
		regexp.QuoteMeta(src) + ` +FINISHED +in 0 .* +out 123,456 \(.*/s\)  \[#{24}\] 100% 4/4 splits`,
		regexp.QuoteMeta(sink) + ` +FINISHED +in 123,456 `,
	} {
		if !regexp.MustCompile(re).MatchString(tail) {
			t.Errorf("the final display lacks %s:\n%s", re, tail)
		}
	}
}

// Off a terminal the output has no escape codes, and a summary with each
// vertex's final counts follows the job's end; --quiet drops it.
func TestRunProgressPlain(t *testing.T) {
	bin := buildWordcount(t)
	for _, quiet := range []bool{false, true} {
		c := newBlobCluster(t)
		graph := playBoundedJob(t, c, 3)
		args := []string{"run", "-m", c.addr, bin, "--input", "/in", "--output", "/out"}
		if quiet {
			args = append([]string{"run", "--quiet"}, args[1:]...)
		}
		r := gofl(t, nil, args...)
		if r.code != 0 {
			t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		t.Logf("stdout:\n%s", r.stdout)
		g := <-graph
		if strings.ContainsRune(r.stdout+r.stderr, 0x1b) {
			t.Errorf("escape codes in plain output:\n%q", r.stdout)
		}
		summary := regexp.MustCompile(`Job [0-9a-f]{32} FINISHED after .* \(rates are averages\):\n`)
		if quiet {
			if summary.MatchString(r.stdout) {
				t.Errorf("--quiet printed the progress summary:\n%s", r.stdout)
			}
			continue
		}
		loc := summary.FindStringIndex(r.stdout)
		if loc == nil {
			t.Fatalf("no summary:\n%s", r.stdout)
		}
		lines := strings.Split(r.stdout[loc[1]:], "\n")
		if len(lines) < len(g.Vertices) {
			t.Fatalf("summary too short:\n%s", r.stdout)
		}
		for i, v := range g.Vertices {
			want := regexp.QuoteMeta(v.Name) + ` +FINISHED +in 123,456 `
			if i == 0 {
				want = regexp.QuoteMeta(v.Name) + ` +FINISHED +in 0 .*out 123,456 .*\[#{24}\] 100% 4/4 splits$`
			}
			if !regexp.MustCompile(want).MatchString(lines[i]) {
				t.Errorf("summary line %d %q does not match %s", i, lines[i], want)
			}
		}
	}
}

// The wordcount example (stream.TextFile, whose splits come from the
// JobMaster's enumerator) run on a per-job cluster with stdout on a
// terminal draws its source's progress bar in place, complete at the end.
func TestRunWordcountProgressOnATerminal(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	tty, screen := terminal(t)
	out := filepath.Join(e.home, "out")
	r := e.runOn(tty, "run", "-m", "per-job", "-t", "local", "-p", "2", e.wc, "--input", e.input, "--output", out)
	term := screen()
	if r.code != 0 {
		t.Fatalf("exit %d\n%q\n%s", r.code, term, r.stderr)
	}
	e.checkCounts(out)
	if !strings.Contains(term, "\x1b[2K") {
		t.Errorf("no in-place redraw (ANSI) on a terminal:\n%q", term)
	}
	// The lines as drawn, without the escape sequences (cursor moves, clears).
	lines := regexp.MustCompile(`\r|\x1b\[[0-9;]*[A-Za-z]`).ReplaceAllString(term, "")
	if !wordcountBarDone.MatchString(lines) {
		t.Errorf("the terminal shows no complete progress bar of the TextFile source:\n%q", term)
	}
}

// terminal opens a pty for a run's stdout; screen closes the run's side
// and returns all the run wrote once the reader has drained it.
func terminal(t *testing.T) (tty *os.File, screen func() string) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("opening a pty: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	var buf bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		_, err := io.Copy(&buf, ptmx)
		if err != nil && !errors.Is(err, syscall.EIO) && !errors.Is(err, os.ErrClosed) {
			t.Errorf("reading the pty: %v", err)
		}
	}()
	return tty, func() string {
		tty.Close()
		<-read
		return buf.String()
	}
}
