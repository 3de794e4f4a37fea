package web_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/jobmanager/rest"
	"github.com/gofl/gofl/jobmanager/rest/resttest"
	"github.com/gofl/gofl/rpc/restapi"
	"github.com/gofl/gofl/web"
	"github.com/gofl/gofl/web/webtest"
)

// TestDashboardInBrowser loads every page in headless Chromium against the
// REST handler over an in-memory Dispatcher that requires a token and
// forbids cancelling: the page asks for the token, keeps it in
// sessionStorage only, and then shows the cluster, the job graph with its
// edges, the exception's root cause, the TaskManager and the masked
// configuration, with no console error.
func TestDashboardInBrowser(t *testing.T) {
	const token = "dashboard-secret-token"
	d := resttest.NewDispatcher()
	d.AddTaskManager(restapi.TaskManagerInfo{ID: "tm-1", Path: "127.0.0.1:6122", DataPort: 6121, SlotsNumber: 4, FreeSlots: 1,
		Hardware:            &restapi.HardwareDescription{CPUCores: 8, PhysicalMemory: 16 << 30, FreeMemory: 10 << 30},
		MemoryConfiguration: &restapi.MemoryConfiguration{},
		StatusMetrics:       map[string]float64{"Status.Go.Memory.Heap.Used": 3 << 20, "Status.Go.Goroutines": 42}})
	id, err := d.SubmitJob(context.Background(), resttest.Wordcount(""))
	if err != nil {
		t.Fatal(err)
	}
	// Count's subtasks saw event time up to 2023-11-14 22:13:20 UTC.
	if err := d.SetTaskMetrics(id, "count", map[string]float64{"currentInputWatermark": 1_700_000_000_000}); err != nil {
		t.Fatal(err)
	}
	d.AddException(id, restapi.ExceptionEntry{ExceptionName: "TaskFailure", Stacktrace: "boom <b>not html</b>\n\tat count", Timestamp: 1,
		TaskName: "Count (2/4)", Location: "tm-1", FailureType: "TASK"})
	api := rest.NewHandler(d, zerolog.Nop(), rest.Options{DisableCancel: true, Version: "test",
		Config: []restapi.ConfigEntry{{Key: "rest.authentication.token", Value: "******"}, {Key: "parallelism.default", Value: "2"}}})
	srv := httptest.NewServer(web.Mount(rest.Authenticate(token, api, nil), web.Handler("")))
	defer srv.Close()

	b := browser{webtest.New(t)}
	b.AllowFailedRequest(`/config$`) // the first call, before the token
	b.AllowFailedRequest(`/(taskmanagers/[^/]+|jobmanager)/(logs|stdout|metrics)`)
	b.Navigate(srv.URL + "/")
	b.WaitFor("the token form", `!document.getElementById('token-form').hidden`)
	b.WaitText("#banner", "requires a REST token")
	b.Screenshot("token-asked")
	b.run(`document.getElementById('token-input').value = '` + token + `'; document.getElementById('token-form').requestSubmit()`)

	b.WaitText(`[data-stat="taskmanagers"]`, "1")
	b.WaitText(`[data-stat="slots-total"]`, "4")
	b.WaitText(`[data-stat="slots-available"]`, "1")
	b.WaitText("#running-jobs", "wordcount")
	if got := webtest.Eval[string](b.Browser, `sessionStorage.getItem('gofl.rest.token')`); got != token {
		t.Errorf("sessionStorage token %q", got)
	}
	if got := webtest.Eval[int](b.Browser, `localStorage.length`); got != 0 {
		t.Errorf("localStorage holds %d items; the token belongs in sessionStorage only", got)
	}
	b.Screenshot("overview")

	b.Go("#/job/" + id)
	b.WaitFor("three DAG nodes", `document.querySelectorAll('svg.dag g.node').length === 3`)
	b.WaitFor("two DAG edges", `document.querySelectorAll('svg.dag path.edge').length === 2`)
	for _, name := range []string{"Source: words", "Count", "Sink: print"} {
		b.WaitText("svg.dag g.node text.title", name)
		b.WaitText("#job-vertices", name)
	}
	b.WaitFor("the edge source→count", `document.querySelector('svg.dag path.edge[data-from="source"][data-to="count"]')`)
	b.WaitText("svg.dag", "HASH")
	b.WaitText("#job-vertices", "RUNNING")
	b.WaitFor("4 subtasks of Count", `document.querySelectorAll('#job-subtasks details[data-vertex-id="count"] tbody tr').length === 4`)
	b.WaitText("#root-exception", "boom <b>not html</b>")
	if n := b.Count("#root-exception b"); n != 0 {
		t.Errorf("the exception text was rendered as HTML")
	}
	b.WaitText("#job-actions", "web.cancel.enable: false")
	if n := b.Count("#cancel-job"); n != 0 {
		t.Errorf("a cancel button although web.cancel.enable is false")
	}
	b.WaitText(`#job-vertices [data-vertex-id="count"] .watermark`, "2023-11-14 22:13:20 UTC")
	b.WaitText(`#job-subtasks details[data-vertex-id="count"] tbody tr[data-subtask="3"]`, "2023-11-14 22:13:20 UTC")
	b.WaitText("#job-checkpoints", "No checkpoints")
	b.Screenshot("job")

	b.Go("#/taskmanagers")
	b.WaitText(`#taskmanager-list [data-taskmanager-id="tm-1"]`, "127.0.0.1:6122")
	b.WaitText(`#taskmanager-list [data-taskmanager-id="tm-1"]`, "16 GiB")
	b.Screenshot("taskmanagers")
	b.Go("#/taskmanager/tm-1")
	b.WaitText("#taskmanager-details", "127.0.0.1:6122")
	b.WaitText("#taskmanager-memory", "Physical memory")
	b.WaitText("#taskmanager-memory", "3.0 MiB") // the heap in use
	b.WaitText("#taskmanager-logs", "not served")
	b.Screenshot("taskmanager")

	b.Go("#/jobmanager")
	b.WaitText(`#jobmanager-config [data-key="rest.authentication.token"]`, "******")
	b.WaitText(`#jobmanager-config [data-key="parallelism.default"]`, "2")
	b.Screenshot("jobmanager")

	for _, m := range b.Messages() {
		if strings.Contains(m.Text, token) || strings.Contains(m.URL, token) {
			t.Errorf("the token reached the console: %s", m)
		}
	}
	b.CheckConsole()
}

// browser adds a statement runner to webtest.Browser.
type browser struct{ *webtest.Browser }

func (b browser) run(js string) { webtest.Eval[bool](b.Browser, "(() => { "+js+"; return true })()") }
