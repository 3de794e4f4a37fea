package taskmanager

import (
	"cmp"
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gofl/gofl/rpc/pb"
)

// Snapshot is a point-in-time view of a TaskExecutor's state, for tests,
// logs and (later) the REST API's TaskManager pages.
type Snapshot struct {
	ResourceID string
	Address    string
	// Registered is true while registered at the ResourceManager with ID
	// ResourceManagerID.
	Registered        bool
	ResourceManagerID string
	Slots             []SlotInfo
	Jobs              []JobInfo
	Tasks             []TaskInfo
	Partitions        []PartitionInfo
}

// SlotInfo describes one slot; AllocationID is empty while it is free.
type SlotInfo struct {
	Index        int
	AllocationID string
	JobID        string
	Active       bool // accepted by the JobMaster
	Releasing    bool // freed, waiting for its tasks to end
	// Kept: its JobMaster lost its leadership; it waits for the job's next
	// one until taskmanager.slot.timeout.
	Kept bool
}

// JobInfo describes the connection to one job's JobMaster.
type JobInfo struct {
	JobID       string
	Address     string
	Connected   bool
	JobMasterID string
	// DataAddress is the job's data address here, as advertised to the
	// JobMaster.
	DataAddress string
	// PausedUntil, if not zero, is when a registration or offer deferred
	// after the JobMaster's rejections goes out.
	PausedUntil time.Time
	// Tombstones counts the cancelled attempts remembered for the job.
	Tombstones int
}

// TaskInfo describes one running task attempt.
type TaskInfo struct {
	JobID        string
	Attempt      string // graph/vertex/subtask/attempt
	AllocationID string
	Name         string
	Invokable    string
	Canceling    bool
}

// PartitionInfo is one BLOCKING result partition a finished task produced.
type PartitionInfo struct {
	JobID          string
	ResultID       string
	PartitionIndex int
	Producer       string // graph/vertex/subtask/attempt
}

// Snapshot returns the current state; it fails only if the TaskExecutor
// stopped or ctx ended.
func (te *TaskExecutor) Snapshot(ctx context.Context) (Snapshot, error) {
	return onMailbox(ctx, te, func() (Snapshot, error) {
		s := Snapshot{ResourceID: te.cfg.ResourceID, Address: te.addr}
		if te.rm != nil && te.rm.registered {
			s.Registered, s.ResourceManagerID = true, te.rm.id
		}
		for _, sl := range te.slots {
			s.Slots = append(s.Slots, SlotInfo{Index: sl.index, AllocationID: sl.allocationID, JobID: sl.jobID, Active: sl.active, Releasing: sl.releasing, Kept: sl.kept})
		}
		for _, jc := range te.jobs {
			s.Jobs = append(s.Jobs, JobInfo{JobID: jc.jobID, Address: jc.address, Connected: jc.connected, JobMasterID: jc.jobMasterID,
				DataAddress: jc.dataAddr, PausedUntil: jc.pausedUntil, Tombstones: te.cancelled[jc.jobID].len()})
		}
		sort.Slice(s.Jobs, func(i, j int) bool { return s.Jobs[i].JobID < s.Jobs[j].JobID })
		for _, t := range te.sortedTasks() {
			s.Tasks = append(s.Tasks, TaskInfo{JobID: t.jobID, Attempt: t.key, AllocationID: t.allocationID, Name: t.name, Invokable: t.invokable, Canceling: t.canceled})
		}
		for job, m := range te.partitions {
			for _, hp := range m {
				p := hp.id
				s.Partitions = append(s.Partitions, PartitionInfo{JobID: job, ResultID: p.ResultId, PartitionIndex: int(p.PartitionIndex), Producer: attemptKey(p.Producer)})
			}
		}
		slices.SortFunc(s.Partitions, func(a, b PartitionInfo) int {
			return cmp.Or(strings.Compare(a.JobID, b.JobID), strings.Compare(a.ResultID, b.ResultID),
				cmp.Compare(a.PartitionIndex, b.PartitionIndex), strings.Compare(a.Producer, b.Producer))
		})
		return s, nil
	})
}

func (te *TaskExecutor) sortedTasks() []*task {
	out := make([]*task, 0, len(te.tasks))
	for _, t := range te.tasks {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

var _ pb.TaskExecutorServiceServer = (*service)(nil)
