package jobmanager_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/web/webtest"
)

// TestDashboardDuringAndAfterAJob loads the dashboard from a real
// JobManager in headless Chromium while a job runs on two TaskManager
// processes, and after the dashboard's own cancel button stopped it: the
// overview counts TaskManagers, slots and jobs, the job page draws its
// vertices and edge and shows the records that passed and the TaskManagers
// its subtasks run on, and the TaskManager and JobManager pages render, with
// no console error. It logs the first load's time and payload.
func TestDashboardDuringAndAfterAJob(t *testing.T) {
	parallel(t)
	if webtest.ExecPath() == "" {
		webtest.New(t) // fails under CI, skips elsewhere
	}
	c := newCluster(t, map[string]string{"parallelism.default": "2"})
	for _, id := range []string{"tm-a", "tm-b"} {
		c.startTaskManagerProcess(id, 2)
	}
	c.waitForTaskManagers(2)
	const n = 1500
	id := c.runSDKJob(testJobBinary, 2, "held-numbers", "--count", fmt.Sprint(n), "--output", filepath.Join(t.TempDir(), "out"))
	defer func() { _ = c.client.CancelJob(context.Background(), id) }()
	det := c.waitFor(id, waitLimit, "RUNNING")
	if len(det.Vertices) != 2 {
		t.Fatalf("vertices %+v", det.Vertices)
	}
	source, sink := det.Vertices[0], det.Vertices[1]
	if !strings.HasPrefix(source.Name, "Numbers") {
		source, sink = sink, source
	}
	// The source's records reached the sink: the dashboard has numbers to show.
	c.eventually(2*waitLimit, func() error {
		d, err := c.client.JobDetails(c.ctx, id)
		if err != nil {
			return err
		}
		for _, v := range d.Vertices {
			if v.ID == sink.ID && v.Metrics.ReadRecords != n {
				return fmt.Errorf("%s read %d records, want %d", v.Name, v.Metrics.ReadRecords, n)
			}
		}
		return nil
	})

	b := webtest.New(t)
	b.AllowFailedRequest(`/(taskmanagers/[^/]+|jobmanager)/(logs|stdout|metrics)`)
	base := "http://" + c.jm.RESTAddress
	start := time.Now()
	b.Navigate(base + "/")
	b.WaitText("#running-jobs", det.Name)
	load := time.Since(start)
	type entry struct {
		Name     string  `json:"name"`
		Transfer float64 `json:"transferSize"`
		Decoded  float64 `json:"decodedBodySize"`
	}
	entries := webtest.Eval[[]entry](b, `performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))
		.map((e) => ({name: e.name, transferSize: e.transferSize, decodedBodySize: e.decodedBodySize}))`)
	var transfer, decoded float64
	for _, e := range entries {
		transfer, decoded = transfer+e.Transfer, decoded+e.Decoded
	}
	t.Logf("dashboard first load: %v to the running job's row; %d requests, %.1f KiB transferred, %.1f KiB decoded",
		load.Round(time.Millisecond), len(entries), transfer/1024, decoded/1024)
	b.WaitText(`[data-stat="taskmanagers"]`, "2")
	b.WaitText(`[data-stat="slots-total"]`, "4")
	b.WaitText(`[data-stat="jobs-running"]`, "1")
	b.Screenshot("overview-running")

	b.Go("#/job/" + id)
	b.WaitFor("two DAG nodes", `document.querySelectorAll('svg.dag g.node').length === 2`)
	b.WaitFor("the DAG's edge", fmt.Sprintf(`document.querySelector('svg.dag path.edge[data-from=%q][data-to=%q]')`, source.ID, sink.ID))
	b.WaitText(fmt.Sprintf(`svg.dag g.node[data-vertex-id=%q]`, source.ID), source.Name)
	b.WaitText(fmt.Sprintf(`svg.dag g.node[data-vertex-id=%q]`, sink.ID), "RUNNING")
	b.WaitText(fmt.Sprintf(`#job-vertices tr[data-vertex-id=%q]`, sink.ID), fmt.Sprint(n)) // records in
	b.WaitFor("four subtasks, each on tm-a or tm-b", `(() => { const rows = [...document.querySelectorAll('#job-subtasks tbody tr')];
		return rows.length === 4 && rows.every((r) => ['tm-a', 'tm-b'].includes(r.cells[3].textContent)) })()`)
	b.WaitText("#job-exceptions", "No exceptions")
	b.Screenshot("job-running")

	// Cancel from the page: the button asks once more, then the job ends.
	b.WaitFor("the cancel button", `document.getElementById('cancel-job')`)
	webtest.Eval[bool](b, `document.getElementById('cancel-job').click(), true`)
	b.WaitText("#cancel-job", "Confirm")
	webtest.Eval[bool](b, `document.getElementById('cancel-job').click(), true`)
	c.waitFor(id, waitLimit, "CANCELED")
	b.WaitText("main h1", "CANCELED")
	b.WaitText(fmt.Sprintf(`svg.dag g.node[data-vertex-id=%q]`, sink.ID), "CANCELED")
	b.Screenshot("job-canceled")

	b.Go("#/overview")
	b.WaitText("#completed-jobs", det.Name)
	b.WaitText(`[data-stat="jobs-cancelled"]`, "1")
	b.Screenshot("overview-after")

	b.Go("#/taskmanagers")
	b.WaitFor("two TaskManagers", `document.querySelectorAll('#taskmanager-list tbody tr').length === 2`)
	b.Go("#/taskmanager/tm-a")
	b.WaitText("#taskmanager-details", "127.0.0.1")
	b.WaitFor("the logs section", `document.querySelector('#taskmanager-logs p, #taskmanager-logs details')`)
	b.Screenshot("taskmanager")

	b.Go("#/jobmanager")
	b.WaitText(`#jobmanager-config [data-key="parallelism.default"]`, "2")
	b.WaitText(`#jobmanager-config [data-key="heartbeat.interval"]`, "100")
	b.WaitText("#jobmanager-metrics", "Goroutines")
	b.Screenshot("jobmanager")
	b.CheckConsole()
}
