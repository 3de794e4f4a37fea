package scheduler

import (
	"errors"
	"strings"
	"testing"

	"github.com/gofl/gofl/jobgraph"
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
)

// corrupted is a running one-task job whose task's state the test broke
// behind the scheduler's back, so that the report that follows makes the
// core attempt an illegal transition.
func corrupted(t *testing.T, strict bool) (*Scheduler, eg.ExecutionAttemptID) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.StrictTransitions = strict
	jg := &jobgraph.JobGraph{JobID: "j", Name: "j", Type: jobgraph.Streaming,
		Vertices: []*jobgraph.Vertex{{ID: "a", Name: "a", Parallelism: 1, Invokable: "noop", SlotSharingGroup: "default"}}}
	s, err := New(cfg, jg, 1)
	if err != nil {
		t.Fatal(err)
	}
	steps := []Event{StartScheduling{}, SlotsOffered{TaskManager: eg.TaskManagerLocation{ID: "tm"}, Slots: []SlotOffer{{Allocation: "s"}}}}
	for _, ev := range steps {
		if err := s.Step(0, ev); err != nil {
			t.Fatal(err)
		}
		s.Ready()
	}
	id := s.g.AttemptID(0)
	s.g.Vertices[0].Current.State = eg.ExecutionState(42)
	return s, id
}

func TestIllegalTransitionPanicsWhenStrict(t *testing.T) {
	s, id := corrupted(t, true)
	defer func() {
		r := recover()
		err, ok := r.(error)
		if !ok || !errors.Is(err, ErrIllegalState) || !errors.Is(err, eg.ErrIllegalTransition) {
			t.Fatalf("recovered %v, want an ErrIllegalState panic", r)
		}
	}()
	_ = s.Step(0, TaskStateChanged{Attempt: id, State: eg.Finished})
	t.Fatal("no panic")
}

// Without strict transitions the job fails, non-recoverably, with the
// whole context: never silently ignored.
func TestIllegalTransitionFailsTheJob(t *testing.T) {
	s, id := corrupted(t, false)
	if err := s.Step(0, TaskStateChanged{Attempt: id, State: eg.Finished}); err != nil {
		t.Fatal(err)
	}
	r := s.Ready()
	if len(r.JobStatus) == 0 || r.JobStatus[0].To != JobFailing {
		t.Fatalf("status changes %+v, want FAILING", r.JobStatus)
	}
	cause := r.JobStatus[0].Cause
	if !errors.Is(cause, ErrIllegalState) {
		t.Fatalf("cause %v, want ErrIllegalState", cause)
	}
	for _, want := range []string{"TaskStateChanged", "a#0.0", "to FINISHED", "job RUNNING"} {
		if !strings.Contains(cause.Error(), want) {
			t.Errorf("cause %q lacks %q", cause, want)
		}
	}
	if h := s.ExceptionHistory(); len(h) != 1 || !errors.Is(h[0].Cause, ErrIllegalState) {
		t.Errorf("exception history %+v", h)
	}
}
