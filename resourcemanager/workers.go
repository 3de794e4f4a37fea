package resourcemanager

// workerDriver is the seam where an active resource provider (local
// processes, Nomad) will plug in, as Flink's ResourceManagerDriver does.
// Every method is called on the ResourceManager's mailbox and must not
// block. Worker-terminated events come back through
// ResourceManager.workerTerminated, which unregisters the TaskExecutor at
// once instead of waiting for its heartbeat timeout.
type workerDriver interface {
	// missing reports, after every matching round, how many slots the jobs
	// need that neither registered slots nor calls in flight cover. An active
	// driver starts workers for them (minus those already starting).
	missing(slots int)
	// registered says a TaskExecutor registered (a started worker arrived).
	registered(resourceID string)
	// release says a TaskExecutor was unregistered; an active driver stops
	// the worker if it still runs.
	release(resourceID string)
}

// passiveWorkers is standalone mode: workers are started and stopped by
// hand, so the ResourceManager never asks for or releases any.
type passiveWorkers struct{}

func (passiveWorkers) missing(int)       {}
func (passiveWorkers) registered(string) {}
func (passiveWorkers) release(string)    {}
