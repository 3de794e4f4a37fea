// Package gateway holds what a JobMaster and the ResourceManager share:
// the JobMaster's gateway the ResourceManager calls, and the
// ResourceManager's sentinel errors the JobMaster's retries test for. It
// imports nothing of gofl, so package jobmaster needs no import of package
// resourcemanager (and its providers) for an interface or an errors.Is;
// package resourcemanager re-exports each name.
package gateway

import (
	"context"
	"errors"
)

// Sentinel errors of the ResourceManager (re-exported by package
// resourcemanager under the same names).
var (
	// ErrStopped: the ResourceManager is not running (any more).
	ErrStopped = errors.New("resourcemanager: stopped")
	// ErrInvalidArgument: a caller passed an empty ID, a nil gateway or a
	// negative requirement.
	ErrInvalidArgument = errors.New("resourcemanager: invalid argument")
	// ErrJobMasterNotRegistered: a requirement was declared for a job whose
	// JobMaster is not registered (or was disconnected).
	ErrJobMasterNotRegistered = errors.New("resourcemanager: job master not registered")
)

// JobMasterGateway is what the ResourceManager needs from a job's JobMaster
// (implemented by jobmaster). JobMasters live in the ResourceManager's
// process, so these are Go calls, not RPCs. The Notify methods are called
// on the ResourceManager's mailbox: they must never block (the JobMaster
// posts to its own mailbox), or one slow job would stall the
// ResourceManager for every other.
type JobMasterGateway interface {
	// NotifyNotEnoughResources: the cluster cannot provide the declared
	// requirement; acquired is how many slots the job holds (allocated, or
	// with a RequestSlot in flight). Called on the ResourceManager's mailbox:
	// it must not block. May be called repeatedly.
	NotifyNotEnoughResources(acquired int)
	// HeartbeatFromResourceManager blocks until the JobMaster answered or
	// ctx ends; an error other than ctx's means it is gone. Called every
	// heartbeat interval off the ResourceManager's mailbox, at most one call
	// in flight per JobMaster, so a hung JobMaster delays nobody else.
	HeartbeatFromResourceManager(ctx context.Context) error
	// NotifyTaskManagerLost: the TaskManager's worker ended (the provider
	// said so) or it was unregistered; the JobMaster drops it at once
	// instead of waiting for its heartbeat timeout. Called on the
	// ResourceManager's mailbox for every registered JobMaster: it must
	// not block. Idempotent; an unknown resourceID is ignored.
	NotifyTaskManagerLost(resourceID string, cause error)
}

// ResourceAllocationFailureNotifier may be implemented by a
// JobMasterGateway that can fail its pending slot requests at once with a
// cause. An active ResourceManager that gives up starting TaskManagers calls
// it (after NotifyNotEnoughResources) for every job short of slots, with an
// error wrapping resourcemanager.ErrWorkerStartFailed. Called on the
// ResourceManager's mailbox: it must not block.
type ResourceAllocationFailureNotifier interface {
	NotifyResourceAllocationFailed(cause error)
}
