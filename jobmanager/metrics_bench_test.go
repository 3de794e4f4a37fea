package jobmanager_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/jobgraph"
)

// BenchmarkMetricsCost measures what metrics reporting costs wordcount
// (issue 14's goal: < 3%), in pairs of runs on two clusters side by side
// (runPairs): one without reporters, one with Flink's Prometheus reporter
// on the JobManager and both TaskManagers, every process scraped every
// second and the job's vertex metrics polled over REST every second, as
// a Prometheus server and an open dashboard do. It reports throughput
// (MB/s, records/s: input words) and CPU time per MB of the TaskManagers
// and job runners of each side, and the cost of reporting from the pairs'
// ratios with their spread and 95% confidence interval (reportPairs).
// Run it with -benchtime 1x: GOFL_BENCH_PAIRS sets the pairs (default 10;
// each of the b.N iterations runs them all), GOFL_BENCH_WORDCOUNT_MB the
// input (default 50), GOFL_BENCH_METRICS_P the parallelism (default 4:
// every slot, so records cross between the TaskManagers).
func BenchmarkMetricsCost(b *testing.B) {
	mb, p, pairs := 50, 4, benchPairs(10)
	if v, err := strconv.Atoi(os.Getenv("GOFL_BENCH_WORDCOUNT_MB")); err == nil && v > 0 {
		mb = v
	}
	if v, err := strconv.Atoi(os.Getenv("GOFL_BENCH_METRICS_P")); err == nil && v > 0 && v <= 4 {
		p = v
	}
	dir := b.TempDir()
	input := filepath.Join(dir, "input.txt")
	words := writeText(b, input, mb<<20)

	promBase := promPorts(10)
	reporter := map[string]string{"metrics.reporter.prom.factory.class": conf.PrometheusReporterFactory,
		"metrics.reporter.prom.port": fmt.Sprintf("%d-%d", promBase, promBase+9)}
	// Two clusters at once: each one's goroutine check would see the
	// other's; TestMain checks the package at the end.
	parallelTests.Store(b.Name(), true)
	off := startPairedSide(b, "off", 2, nil, nil)
	on := startPairedSide(b, "on", 2, reporter, reporter)
	on.beside = func(stop <-chan struct{}) { pollMetrics(on.c.client, on.c.jm.RESTAddress, promBase, 10, stop) }
	// Both reporters answer before the first run.
	on.c.eventually(waitLimit, func() error {
		jm, tms, err := scrapeRange(promBase, 10)
		if err != nil || jm == nil || len(tms) != 2 {
			return fmt.Errorf("scraped a JobManager: %v, TaskManagers %v (%v)", jm != nil, keys(tms), err)
		}
		return nil
	})

	out := func(s *pairedSide, pair int) string {
		return filepath.Join(dir, fmt.Sprintf("out-%s-%d", s.name, pair))
	}
	b.ResetTimer()
	runs := runPairs(b, pairs*b.N, [2]*pairedSide{off, on}, func(s *pairedSide, pair int) *jobgraph.JobGraph {
		// The warm-up pair too runs the whole input: after a 1 MB one,
		// the first measured pair was once off by 32%.
		return s.c.planSDKJob(wordcountBinary, p, "--input", input, "--output", out(s, pair))
	}, func(s *pairedSide, pair int) {
		if got := wordcountTotal(b, out(s, pair)); got != words {
			b.Fatalf("%s pair %d: counted %d words, wrote %d", s.name, pair, got, words)
		}
		if err := os.RemoveAll(out(s, pair)); err != nil {
			b.Fatal(err)
		}
	})
	b.StopTimer()
	reportPairs(b, [2]*pairedSide{off, on}, runs, pairedWork{"MB", float64(mb)},
		pairedWork{"MB", float64(mb)}, pairedWork{"records", float64(words)})

	// The reporting's own cost, with far less noise: both clusters idle at
	// once, the scraping on one; its extra CPU per second as a share of
	// what the wordcount runs took per second (off side, median).
	idle := idleCPU([2]*pairedSide{off, on}, 20*time.Second)
	var busy []float64
	for _, r := range runs[0] {
		busy = append(busy, float64(r.cpu.Milliseconds())/r.wall.Seconds())
	}
	b.ReportMetric(idle[0], "cpu-ms/s-idle-off")
	b.ReportMetric(idle[1], "cpu-ms/s-idle-on")
	b.ReportMetric(100*(idle[1]-idle[0])/median(busy), "%cost-cpu-idle-scrape")
	b.Logf("idle clusters: off %.1f, on (scraped) %.1f CPU ms/s; the wordcount runs took %.0f CPU ms/s (off, median)",
		idle[0], idle[1], median(busy))
}

// idleCPU is the CPU time per second, in ms, the TaskManagers of each of
// the idle sides spend over d, both measured at once, each side's beside
// load running.
func idleCPU(sides [2]*pairedSide, d time.Duration) (perSecond [2]float64) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, s := range sides {
		if s.beside != nil {
			wg.Add(1)
			go func() { defer wg.Done(); s.beside(stop) }()
		}
	}
	defer wg.Wait()
	defer close(stop)
	c0, begin := [2]time.Duration{sides[0].cpu(), sides[1].cpu()}, time.Now()
	time.Sleep(d) // the measuring window
	el := time.Since(begin).Seconds()
	for i, s := range sides {
		perSecond[i] = float64((s.cpu() - c0[i]).Milliseconds()) / el
	}
	return perSecond
}

// pollMetrics scrapes every Prometheus reporter on the n ports from
// promBase and polls the vertex metrics of every running job of the
// cluster at restAddr over REST, every second, as a Prometheus server and
// an open dashboard do, until stop is closed.
func pollMetrics(cl *client.Client, restAddr string, promBase, n int, stop <-chan struct{}) {
	ctx := context.Background()
	for {
		_, _, _ = scrapeRange(promBase, n)
		if jobs, err := cl.JobsOverview(ctx); err == nil {
			for _, j := range jobs.Jobs {
				if client.IsGloballyTerminal(j.State) {
					continue
				}
				det, err := cl.JobDetails(ctx, j.ID)
				if err != nil {
					continue
				}
				for _, v := range det.Vertices {
					resp, err := http.Get(fmt.Sprintf("http://%s/jobs/%s/vertices/%s/metrics?get=0.numRecordsInPerSecond,0.currentInputWatermark", restAddr, j.ID, v.ID))
					if err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				}
			}
		}
		select {
		case <-stop:
			return
		case <-time.After(time.Second):
		}
	}
}

// wordcountTotal sums the counts of wordcount's output ("<word> <count>"
// lines) in dir.
func wordcountTotal(t testing.TB, dir string) int64 {
	t.Helper()
	var total int64
	for _, line := range readParts(t, dir) {
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			n, _ := strconv.ParseInt(line[i+1:], 10, 64)
			total += n
		}
	}
	return total
}
