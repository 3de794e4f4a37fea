package dispatcher

import (
	"context"
	"errors"
	"testing"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/internal/mailbox"
	"github.com/gofl/gofl/jobmanager/jobmaster"
	"github.com/gofl/gofl/rpc/restapi"
)

func ended(id string, bytes int) archivedJob {
	return archivedJob{id: id, snapshot: jobmaster.Snapshot{
		Details: restapi.JobDetails{ID: id, State: "FINISHED"},
		Result:  &restapi.JobExecutionResult{ID: id, ApplicationStatus: "SUCCEEDED", AccumulatorResults: map[string][]byte{"c": make([]byte, bytes-1)}},
	}}
}

// The history keeps ended jobs' results within jobstore.cache-size by
// dropping the oldest ones, never the newest; a dropped result is an
// error, never an empty result a client would take for no records.
func TestEndedJobsResultsStayWithinTheCacheSize(t *testing.T) {
	d := New(Config{ResultCacheBytes: 250}, nil, zerolog.Nop())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	archive := func(a archivedJob) {
		t.Helper()
		if _, err := mailbox.Call(ctx, d.mb, func() (struct{}, error) {
			d.archived = append(d.archived, a)
			d.dropOldResults()
			return struct{}{}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	archive(ended("a", 100))
	archive(ended("b", 100))
	archive(ended("c", 100)) // 300 > 250: a's result goes
	archive(ended("huge", 1000))

	for id, kept := range map[string]bool{"a": false, "b": false, "c": false, "huge": true} {
		r, err := d.JobExecutionResult(ctx, id)
		if kept {
			if err != nil || len(r.ExecutionResult.AccumulatorResults["c"]) != 999 {
				t.Errorf("%s: %+v, %v; want its result kept", id, r, err)
			}
			continue
		}
		if !errors.Is(err, restapi.ErrResultGone) {
			t.Errorf("%s: %+v, %v; want ErrResultGone", id, r, err)
		}
		// The job itself is still known.
		if det, err := d.JobDetails(ctx, id); err != nil || det.State != "FINISHED" {
			t.Errorf("%s details: %+v, %v", id, det, err)
		}
	}
}
