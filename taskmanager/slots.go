package taskmanager

import (
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/rpc/pb"
)

// slot is one entry of the slot table: free, or allocated to an allocation
// of a job. An allocated slot is active once the job's JobMaster accepted
// it; only active slots run tasks. A freed slot whose tasks still run is
// releasing until the last one ended, like Flink's TaskSlot. A slot whose
// JobMaster lost its leadership is kept: still allocated to the job, but
// inactive, waiting up to Config.SlotTimeout for the job's next JobMaster
// to take it (Flink's markSlotInactive).
type slot struct {
	index        int
	allocationID string
	jobID        string
	allocSeq     uint64 // distinguishes allocations for the slot timeout
	active       bool
	releasing    bool
	kept         bool
}

func (s *slot) free() bool { return s.allocationID == "" }

func (te *TaskExecutor) slotByAllocation(allocationID string) *slot {
	if allocationID == "" {
		return nil
	}
	for _, s := range te.slots {
		if s.allocationID == allocationID {
			return s
		}
	}
	return nil
}

func (te *TaskExecutor) jobHasSlots(jobID string) bool {
	for _, s := range te.slots {
		if s.jobID == jobID {
			return true
		}
	}
	return false
}

func (te *TaskExecutor) jobHasKeptSlots(jobID string) bool {
	for _, s := range te.slots {
		if s.jobID == jobID && s.kept {
			return true
		}
	}
	return false
}

// keepSlot makes an allocated slot inactive but keeps its allocation for
// the job's next JobMaster (a new leader), which it is offered to; if no
// JobMaster took it within Config.SlotTimeout it is freed. The caller
// cancels the slot's tasks and sends the slot report.
func (te *TaskExecutor) keepSlot(s *slot) {
	if s.free() || s.releasing {
		return
	}
	s.active, s.kept, s.allocSeq = false, true, te.nextSeq()
	seq, job := s.allocSeq, s.jobID
	te.log.Info().Str("job_id", job).Str("allocation_id", s.allocationID).Int("slot", s.index).
		Dur("slot_timeout", te.cfg.SlotTimeout).Msg("keeping the slot for the job's next JobMaster")
	te.after(te.cfg.SlotTimeout, func() {
		if s.allocSeq != seq || !s.kept || s.free() || s.releasing {
			return
		}
		te.log.Warn().Str("job_id", job).Str("allocation_id", s.allocationID).Int("slot", s.index).Dur("timeout", te.cfg.SlotTimeout).
			Msg("no JobMaster took the kept slot in time; freeing it")
		s.kept = false
		te.freeSlot(s, fmt.Sprintf("kept slot not taken by a JobMaster within %v", te.cfg.SlotTimeout), nil)
		te.sendSlotReport()
		te.closeJobIfIdle(job)
	})
}

func (te *TaskExecutor) slotReport() *pb.SlotReport {
	r := &pb.SlotReport{}
	for _, s := range te.slots {
		r.Slots = append(r.Slots, &pb.SlotStatus{SlotIndex: int32(s.index), AllocationId: s.allocationID, JobId: s.jobID})
	}
	return r
}

// requestSlot is RequestSlot on the mailbox.
func (te *TaskExecutor) requestSlot(req *pb.RequestSlotRequest) error {
	if te.stopping {
		return status.Error(codes.Unavailable, "TaskManager is shutting down")
	}
	switch {
	case req.AllocationId == "" || req.JobId == "":
		return status.Error(codes.InvalidArgument, "RequestSlot needs an allocation_id and a job_id")
	case req.SlotIndex < 0 || int(req.SlotIndex) >= len(te.slots):
		return status.Errorf(codes.InvalidArgument, "slot index %d out of range: this TaskManager has %d slots", req.SlotIndex, len(te.slots))
	case req.JobMasterAddress == "":
		return status.Error(codes.InvalidArgument, "RequestSlot needs the job_master_address")
	}
	if rm := te.rm; rm != nil && req.ResourceManagerId != "" && rm.id != req.ResourceManagerId {
		if !rm.registered {
			return status.Errorf(codes.FailedPrecondition, "slot request from ResourceManager %s, but this TaskManager is not registered", req.ResourceManagerId)
		}
		return status.Errorf(codes.FailedPrecondition, "slot request from ResourceManager %s, but this TaskManager is registered at %s", req.ResourceManagerId, rm.id)
	}
	s := te.slots[req.SlotIndex]
	log := te.log.With().Str("job_id", req.JobId).Str("allocation_id", req.AllocationId).Int("slot", s.index).Logger()
	if s.allocationID == req.AllocationId {
		if s.jobID != req.JobId {
			return status.Errorf(codes.FailedPrecondition, "allocation %s holds slot %d for job %s, not job %s", s.allocationID, s.index, s.jobID, req.JobId)
		}
		if s.releasing {
			return status.Errorf(codes.ResourceExhausted, "slot %d is being freed from allocation %s", s.index, s.allocationID)
		}
		log.Debug().Msg("slot already allocated to this allocation")
		if err := te.connectJob(req.JobId, req.JobMasterAddress); err != nil {
			return err
		}
		return nil
	}
	if other := te.slotByAllocation(req.AllocationId); other != nil {
		return status.Errorf(codes.FailedPrecondition, "allocation %s already holds slot %d", req.AllocationId, other.index)
	}
	if !s.free() {
		return status.Errorf(codes.ResourceExhausted, "slot %d is allocated to allocation %s of job %s", s.index, s.allocationID, s.jobID)
	}
	s.allocationID, s.jobID, s.allocSeq, s.active = req.AllocationId, req.JobId, te.nextSeq(), false
	log.Info().Msg("slot allocated")
	if err := te.connectJob(req.JobId, req.JobMasterAddress); err != nil {
		s.allocationID, s.jobID = "", ""
		return err
	}
	seq := s.allocSeq
	te.after(te.cfg.SlotTimeout, func() {
		if s.allocSeq == seq && !s.free() && !s.active && !s.releasing {
			log.Warn().Dur("timeout", te.cfg.SlotTimeout).Msg("JobMaster did not accept the slot in time; freeing it")
			te.freeSlot(s, fmt.Sprintf("slot not accepted within %v", te.cfg.SlotTimeout), nil)
			te.sendSlotReport()
			te.closeJobIfIdle(req.JobId)
		}
	})
	return nil
}

// freeSlot cancels the slot's tasks and frees it, at once if none runs,
// else when the last one ended. The caller sends the slot report.
// cancelCause is the tasks' failure if the JobMaster did not ask for it
// (see task.cancelCause).
func (te *TaskExecutor) freeSlot(s *slot, cause string, cancelCause error) {
	if s.free() || s.releasing {
		return
	}
	n := 0
	for _, t := range te.sortedTasks() {
		if t.allocationID == s.allocationID {
			te.cancelTask(t, cancelCause)
			n++
		}
	}
	te.log.Info().Str("job_id", s.jobID).Str("allocation_id", s.allocationID).Int("slot", s.index).
		Int("tasks", n).Str("cause", cause).Msg("freeing slot")
	s.kept = false
	if n > 0 {
		s.releasing = true
		return
	}
	te.releaseSlot(s)
}

func (te *TaskExecutor) releaseSlot(s *slot) {
	*s = slot{index: s.index}
}

// freeSlotRPC is FreeSlot on the mailbox.
func (te *TaskExecutor) freeSlotRPC(req *pb.FreeSlotRequest) error {
	s := te.slotByAllocation(req.AllocationId)
	if s == nil {
		te.log.Debug().Str("allocation_id", req.AllocationId).Msg("FreeSlot of an allocation not held here")
		return nil // already free: idempotent
	}
	job := s.jobID
	te.freeSlot(s, "freed by the JobMaster: "+req.Cause, nil)
	if s.free() {
		te.sendSlotReport()
		te.closeJobIfIdle(job)
	}
	return nil
}
