package providers

import (
	"context"
	"fmt"
	"strconv"

	"github.com/gofl/gofl/conf"
)

// WorkerEvents is the provider-independent part of a WorkerDriver's event
// delivery, shared by the local and Nomad drivers: the handler Start gave,
// and whether the driver was closed (after which no event is delivered).
// It has no lock of its own: every method is called with the driver's lock
// held, the lock that also orders the driver's events.
type WorkerEvents struct {
	handler EventHandler
	closed  bool
}

// Attach is WorkerDriver.Start's part: it fails with ErrClosed once the
// driver closed, else events go to h from now on.
func (e *WorkerEvents) Attach(h EventHandler) error {
	if e.closed {
		return ErrClosed
	}
	e.handler = h
	return nil
}

// Deliver hands ev to the handler, unless the driver closed or was never
// started. The handler must not block (WorkerDriver's contract).
func (e *WorkerEvents) Deliver(ev WorkerEvent) {
	if !e.closed && e.handler != nil {
		e.handler(ev)
	}
}

// Closed reports whether Close ran.
func (e *WorkerEvents) Closed() bool { return e.closed }

// Close marks the driver closed; it reports false if it already was, so
// WorkerDriver.Close stays idempotent.
func (e *WorkerEvents) Close() bool {
	if e.closed {
		return false
	}
	e.closed = true
	return true
}

// CheckWorkerRequest is RequestWorker's common precondition: ctx still
// live and at least one slot. provider prefixes the error.
func CheckWorkerRequest(ctx context.Context, provider string, spec WorkerSpec) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if spec.Slots < 1 {
		return fmt.Errorf("%s: worker spec with %d slots", provider, spec.Slots)
	}
	return nil
}

// TaskManagerConfig is the configuration of one TaskManager a driver
// starts: the JobManager's (base, which drivers strip of JobManager-only
// keys; not modified) plus where to register, its slots and its resource
// ID. The provider adds how the TaskManager is reached. Secret options are
// left out: they would be on the TaskManager's command line or in its job
// spec; a TaskManager reads them from conf.DeploymentSecretsFile.
func TaskManagerConfig(base map[string]string, jobManagerHost, jobManagerPort string, slots int, resourceID string) map[string]string {
	cfg, _ := conf.SplitSecrets(base)
	cfg[conf.JobManagerRPCAddress.Key()] = jobManagerHost
	cfg[conf.JobManagerRPCPort.Key()] = jobManagerPort
	cfg[conf.NumberOfTaskSlots.Key()] = strconv.Itoa(slots)
	cfg[conf.TaskManagerResourceID.Key()] = resourceID
	return cfg
}
