package blob

import (
	"context"
	"sync"
	"time"

	"github.com/gofl/gofl/internal/clock"
)

// Uploads tracks the blobs clients uploaded (POST /blobs) and which jobs
// use them, and removes those nothing needs: an upload no live job
// references, last uploaded or looked up more than the grace period ago.
// Blobs put into the store otherwise (a per-job cluster's staged binary)
// are never removed by it. It is safe for concurrent use.
type Uploads struct {
	store *Store
	clk   clock.Clock
	grace time.Duration

	mu sync.Mutex
	m  map[string]*upload
}

type upload struct {
	touched time.Time
	jobs    map[string]bool
}

// NewUploads tracks uploads to store; unreferenced ones go after grace.
func NewUploads(store *Store, clk clock.Clock, grace time.Duration) *Uploads {
	return &Uploads{store: store, clk: clock.Or(clk), grace: grace, m: map[string]*upload{}}
}

// Uploaded records an upload of key (new or de-duplicated), which
// restarts its grace period. Non-blocking; called by the REST handler.
func (u *Uploads) Uploaded(key string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	e := u.m[key]
	if e == nil {
		e = &upload{jobs: map[string]bool{}}
		u.m[key] = e
	}
	e.touched = u.clk.Now()
}

// Touch restarts the grace period of a tracked upload (a client looked it
// up before a de-duplicated submission); other keys are ignored.
// Non-blocking.
func (u *Uploads) Touch(key string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if e := u.m[key]; e != nil {
		e.touched = u.clk.Now()
	}
}

// Run sweeps every interval until ctx ends; the JobManager runs it on a
// goroutine it owns and stops it with ctx.
func (u *Uploads) Run(ctx context.Context, every time.Duration, isLive func(ctx context.Context, jobID string) (bool, error)) {
	for {
		wake := make(chan struct{})
		t := u.clk.AfterFunc(every, func() { close(wake) })
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-wake:
		}
		u.Sweep(ctx, isLive)
	}
}

// Reference records that jobID runs the uploaded blob key; a key that was
// not uploaded is ignored. Non-blocking; called once a submission was
// accepted.
func (u *Uploads) Reference(key, jobID string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if e := u.m[key]; e != nil {
		e.jobs[jobID] = true
	}
}

// Sweep drops the references of jobs that are no longer live and removes
// each upload that no job references and whose grace period passed. It
// returns the keys removed. isLive answers whether a job has not reached a
// terminal state; an error keeps the reference. Blocks for isLive's calls
// and the deletions; called by the JobManager's janitor and before a Put
// that does not fit.
func (u *Uploads) Sweep(ctx context.Context, isLive func(ctx context.Context, jobID string) (bool, error)) []string {
	u.mu.Lock()
	jobs := map[string]bool{}
	for _, e := range u.m {
		for j := range e.jobs {
			jobs[j] = true
		}
	}
	u.mu.Unlock()
	ended := map[string]bool{}
	for j := range jobs {
		if live, err := isLive(ctx, j); err == nil && !live {
			ended[j] = true
		}
	}
	now := u.clk.Now()
	u.mu.Lock()
	var gone []string
	for k, e := range u.m {
		for j := range e.jobs {
			if ended[j] {
				delete(e.jobs, j)
			}
		}
		if len(e.jobs) == 0 && now.Sub(e.touched) >= u.grace {
			gone = append(gone, k)
			delete(u.m, k)
		}
	}
	u.mu.Unlock()
	var removed []string
	for _, k := range gone {
		if u.store.Delete(k) == nil {
			removed = append(removed, k)
		}
	}
	return removed
}
