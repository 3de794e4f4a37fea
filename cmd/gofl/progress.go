package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/gofl/gofl/rpc/restapi"
)

// flagQuiet turns the attached run's progress display off.
const flagQuiet = "quiet"

// How often the progress display draws: in place on a terminal; a block of
// plain lines elsewhere (logs, CI), where redrawing is not possible.
const (
	progressTTYInterval   = 250 * time.Millisecond
	progressPlainInterval = 10 * time.Second
	// rateWindow is the span a rate is measured over: polls 100 ms apart
	// would show the batching of the records, not their rate.
	rateWindow = time.Second
	barWidth   = 24
)

// progressHelp is `gofl run --help`'s paragraph on the display.
const progressHelp = `While it follows the job, gofl shows each vertex's records in and out
(numRecordsIn/numRecordsOut) with their rate per second, measured by gofl
over the last second, and, for bounded sources whose split enumerator
reports it (FromSource with a TextFileSource), a progress bar of the splits
finished. On a terminal the display redraws in place up to 4 times a second;
when stdout is not a terminal it is plain text without escape codes: a line
per vertex every 10 s and a summary (records, average rate) when the job
ends. --quiet shows only the job's state changes and result.`

// progressView draws an attached run's per-vertex progress. It is used by
// followJob's goroutine only.
type progressView struct {
	w        io.Writer
	tty      bool
	off      bool
	interval time.Duration
	drawn    int       // lines of the block on screen (tty)
	last     time.Time // last draw
	vertices []vertexProgress
	byID     map[string]int
}

type vertexProgress struct {
	id, name, status string
	parallelism      int
	in, out          int64
	inRate, outRate  float64
	base             time.Time // the rates' window start
	baseIn, baseOut  int64
	progress         *restapi.SourceProgress // last reported
	rateKnown        bool
}

// newProgressView returns the display for c's command: off with --quiet,
// in place when c's stdout is a terminal, else plain.
func newProgressView(c *cli.Context) *progressView {
	p := &progressView{w: c.App.Writer, off: c.Bool(flagQuiet), byID: map[string]int{}, interval: progressPlainInterval}
	if f, ok := c.App.Writer.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty, p.interval = true, progressTTYInterval
	} else {
		p.last = time.Now() // plain: a job shorter than the interval gets only the summary
	}
	return p
}

// clear removes the block from a terminal before other output; redraw
// puts it back.
func (p *progressView) clear() {
	if p.tty && p.drawn > 0 {
		fmt.Fprintf(p.w, "\x1b[%dA\r\x1b[J", p.drawn)
		p.drawn = 0
	}
}

func (p *progressView) redraw() {
	if p.tty && !p.off && len(p.vertices) > 0 {
		p.draw()
	}
}

// update takes a poll of the job's details at now and draws when due.
func (p *progressView) update(d restapi.JobDetails, now time.Time) {
	if p.off {
		return
	}
	for _, v := range d.Vertices {
		i, ok := p.byID[v.ID]
		if !ok {
			i = len(p.vertices)
			p.byID[v.ID] = i
			p.vertices = append(p.vertices, vertexProgress{id: v.ID, base: now})
		}
		vp := &p.vertices[i]
		vp.name, vp.status, vp.parallelism = v.Name, v.Status, v.Parallelism
		vp.in, vp.out = max(vp.in, v.Metrics.ReadRecords), max(vp.out, v.Metrics.WriteRecords)
		if v.SourceProgress != nil {
			sp := *v.SourceProgress
			vp.progress = &sp
		}
		if dt := now.Sub(vp.base); dt >= rateWindow {
			vp.inRate = float64(vp.in-vp.baseIn) / dt.Seconds()
			vp.outRate = float64(vp.out-vp.baseOut) / dt.Seconds()
			vp.base, vp.baseIn, vp.baseOut, vp.rateKnown = now, vp.in, vp.out, true
		}
	}
	if now.Sub(p.last) < p.interval || len(p.vertices) == 0 {
		return
	}
	p.last = now
	p.clear()
	p.draw()
}

// finish draws the final state after the job ended (FINISHED or not):
// counts and average rates over the job's duration.
func (p *progressView) finish(d restapi.JobDetails) {
	if p.off {
		return
	}
	p.update(d, p.last) // counts only: not due
	p.clear()
	secs := float64(d.Duration) / 1000
	for i := range p.vertices {
		vp := &p.vertices[i]
		vp.rateKnown = secs > 0
		if secs > 0 {
			vp.inRate, vp.outRate = float64(vp.in)/secs, float64(vp.out)/secs
		}
	}
	if !p.tty {
		fmt.Fprintf(p.w, "Job %s %s after %v (rates are averages):\n", d.ID, d.State, time.Duration(d.Duration)*time.Millisecond)
	}
	p.draw()
	p.drawn = 0 // the final block stays
}

// draw writes the block: one line per vertex.
func (p *progressView) draw() {
	width := 0
	for _, vp := range p.vertices {
		width = max(width, len(vp.name))
	}
	var b strings.Builder
	for _, vp := range p.vertices {
		if p.tty {
			b.WriteString("\r\x1b[2K")
		}
		fmt.Fprintf(&b, "  %-*s %-9s in %s%s  out %s%s", width, vp.name, vp.status,
			count(vp.in), rate(vp.inRate, vp.rateKnown), count(vp.out), rate(vp.outRate, vp.rateKnown))
		if bar := vp.bar(); bar != "" {
			b.WriteString("  " + bar)
		}
		b.WriteByte('\n')
	}
	fmt.Fprint(p.w, b.String())
	if p.tty {
		p.drawn = len(p.vertices)
	}
}

// bar is the vertex's source progress: splits finished of total, 100%
// once all its subtasks finished.
func (vp *vertexProgress) bar() string {
	sp := vp.progress
	if sp == nil || sp.Total <= 0 {
		return ""
	}
	done := min(sp.Done, sp.Total)
	if vp.status == "FINISHED" {
		done = sp.Total
	}
	frac := float64(done) / float64(sp.Total)
	n := int(frac * barWidth)
	return fmt.Sprintf("[%s%s] %3.0f%% %d/%d %s", strings.Repeat("#", n), strings.Repeat("-", barWidth-n), frac*100, done, sp.Total, sp.Unit)
}

// count formats n with thousands separators.
func count(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// rate formats records per second: " (12.3k/s)"; empty until measured.
func rate(r float64, known bool) string {
	if !known {
		return ""
	}
	switch {
	case r >= 1e6:
		return fmt.Sprintf(" (%.1fM/s)", r/1e6)
	case r >= 1e3:
		return fmt.Sprintf(" (%.1fk/s)", r/1e3)
	default:
		return fmt.Sprintf(" (%.0f/s)", r)
	}
}
