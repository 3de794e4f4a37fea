package mock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/gofl/gofl/jobgraph"
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/jobmanager/scheduler"
	"github.com/gofl/gofl/jobmanager/scheduler/mock"
)

func TestFixturesAreValid(t *testing.T) {
	for name, jg := range map[string]*jobgraph.JobGraph{
		"two-vertex pointwise": mock.TwoVertexJob(3, jobgraph.Pipelined, jobgraph.Pointwise),
		"streaming":            mock.StreamingJob(3),
		"batch":                mock.BatchJob(3),
		"wordcount":            mock.Wordcount(3, false),
		"wordcount batch":      mock.Wordcount(3, true),
	} {
		if err := jg.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got := mock.BatchJob(1).Type; got != jobgraph.Batch {
		t.Errorf("BatchJob type = %s, want BATCH", got)
	}
	if got := mock.Config().Restart.Type; got != "none" {
		t.Errorf("Config restart type = %q, want none", got)
	}
	offers := mock.TaskManagers(2, 3)
	if len(offers) != 2 || len(offers[1].Slots) != 3 || offers[1].TaskManager.ID != "tm-1" ||
		offers[1].Slots[2].Allocation != "tm-1/2" || offers[1].TaskManager.DataAddress != "127.0.0.1:40001" {
		t.Errorf("TaskManagers(2, 3) = %+v", offers)
	}
	if n := len(mock.TaskManagersFor(21, 10)); n != 3 {
		t.Errorf("TaskManagersFor(21, 10) has %d TaskManagers, want 3", n)
	}
}

// finishAll reports every deployment RUNNING then FINISHED until nothing
// more is deployed, and returns the number of tasks run and the partitions
// released.
func finishAll(t *testing.T, s *scheduler.Scheduler, r scheduler.Ready) (tasks, released int) {
	t.Helper()
	for len(r.Deployments) > 0 {
		var attempts []eg.ExecutionAttemptID
		for _, d := range r.Deployments {
			attempts = append(attempts, mock.AttemptOf(d))
		}
		tasks += len(attempts)
		mock.Report(s, 0, eg.Running, attempts...)
		r = mock.Report(s, 0, eg.Finished, attempts...)
		for _, pr := range r.PartitionReleases {
			released += len(pr.Partitions)
		}
	}
	return tasks, released
}

func TestWordcountBatchRunsToCompletion(t *testing.T) {
	const p = 4
	s := mock.New(mock.Config(), mock.Wordcount(p, true))
	mock.Drive(s, 0, scheduler.StartScheduling{})
	r := mock.Offer(s, 0, mock.TaskManagers(2, 2))
	tasks, released := finishAll(t, s, r)
	if s.Status() != scheduler.JobFinished {
		t.Fatalf("status %s, want FINISHED", s.Status())
	}
	if tasks != 4*p || released != 3*p {
		t.Errorf("ran %d tasks and released %d partitions, want %d and %d", tasks, released, 4*p, 3*p)
	}
}

func TestWordcountStreamingRestartsAfterFailure(t *testing.T) {
	const p = 3
	s := mock.New(mock.RestartingConfig(1, time.Second), mock.Wordcount(p, false))
	mock.Drive(s, 0, scheduler.StartScheduling{})
	r := mock.Offer(s, 0, mock.TaskManagers(p, 1))
	if len(r.Deployments) != 4*p {
		t.Fatalf("%d deployments, want %d", len(r.Deployments), 4*p)
	}
	var attempts []eg.ExecutionAttemptID
	for _, d := range r.Deployments {
		attempts = append(attempts, mock.AttemptOf(d))
	}
	mock.Report(s, 0, eg.Running, attempts...)
	r = mock.Drive(s, time.Second, scheduler.TaskStateChanged{Attempt: attempts[0], State: eg.Failed, Cause: errors.New("boom")})
	if len(r.Cancellations) != 4*p-1 {
		t.Fatalf("%d cancellations, want %d", len(r.Cancellations), 4*p-1)
	}
	var canceled []eg.ExecutionAttemptID
	for _, c := range r.Cancellations {
		canceled = append(canceled, c.Attempt)
	}
	r = mock.Report(s, time.Second, eg.Canceled, canceled...)
	if !r.HasWakeAt || r.WakeAt != 2*time.Second {
		t.Fatalf("WakeAt = %v (%v), want 2s", r.WakeAt, r.HasWakeAt)
	}
	r = mock.Drive(s, r.WakeAt, scheduler.Tick{})
	if len(r.Deployments) != 4*p || s.NumRestarts() != 1 {
		t.Fatalf("after the restart: %d deployments, %d restarts; want %d, 1", len(r.Deployments), s.NumRestarts(), 4*p)
	}
	if got := mock.AttemptOf(r.Deployments[0]).Attempt; got != 1 {
		t.Errorf("redeployed attempt %d, want 1", got)
	}
}
