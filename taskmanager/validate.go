package taskmanager

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/internal/ids"
	"github.com/gofl/gofl/rpc/pb"
)

// Syntax checks of what the TaskExecutorService receives, before any of it
// reaches a map, a log line or a path. Each returns an InvalidArgument
// status naming the field and the rule, or nil.

func invalidArgument(err error) error {
	if err == nil {
		return nil
	}
	return status.Error(codes.InvalidArgument, err.Error())
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return invalidArgument(err)
		}
	}
	return nil
}

func checkAttempt(field string, a *pb.ExecutionAttemptID) error {
	if a == nil {
		return &ids.Error{Field: field, Rule: "want an execution attempt ID"}
	}
	return ids.AttemptID(field, a.JobVertexId, a.SubtaskIndex, a.AttemptNumber)
}

func checkPartitionID(field string, p *pb.ResultPartitionIDProto) error {
	if p == nil {
		return &ids.Error{Field: field, Rule: "want a result partition ID"}
	}
	return firstErr(ids.ResultID(field+".result_id", p.ResultId), checkAttempt(field+".producer", p.Producer))
}

func checkRequestSlot(req *pb.RequestSlotRequest) error {
	return firstErr(ids.JobID("RequestSlotRequest.job_id", req.JobId), ids.Name("RequestSlotRequest.allocation_id", req.AllocationId))
}

func checkCancelTask(req *pb.CancelTaskRequest) error {
	return firstErr(ids.JobID("CancelTaskRequest.job_id", req.JobId), checkAttempt("CancelTaskRequest.attempt", req.Attempt))
}

func checkFreeSlot(req *pb.FreeSlotRequest) error {
	return firstErr(ids.Name("FreeSlotRequest.allocation_id", req.AllocationId))
}

func checkReleasePartitions(req *pb.ReleasePartitionsRequest) error {
	if err := ids.JobID("ReleasePartitionsRequest.job_id", req.JobId); err != nil {
		return invalidArgument(err)
	}
	for _, p := range req.Partitions {
		if err := checkPartitionID("ReleasePartitionsRequest.partitions", p); err != nil {
			return invalidArgument(err)
		}
	}
	return nil
}

func checkJobID(field, id string) error { return firstErr(ids.JobID(field, id)) }

func checkCheckpointCall(msg, job string, a *pb.ExecutionAttemptID) error {
	return firstErr(ids.JobID(msg+".job_id", job), checkAttempt(msg+".attempt", a))
}

// checkSubmitTask checks a deployment: its IDs, and that it is the job the
// request names.
func checkSubmitTask(req *pb.SubmitTaskRequest) error {
	d := req.Tdd
	if err := ids.JobID("SubmitTaskRequest.job_id", req.JobId); err != nil {
		return invalidArgument(err)
	}
	if d == nil || d.JobInformation == nil || d.TaskInformation == nil {
		return invalidArgument(&ids.Error{Field: "SubmitTaskRequest.tdd", Rule: "want job and task information"})
	}
	if d.JobInformation.JobId != req.JobId {
		return invalidArgument(&ids.Error{Field: "tdd.job_information.job_id", Value: d.JobInformation.JobId,
			Rule: "want the request's job_id " + req.JobId})
	}
	errs := []error{
		checkAttempt("tdd.attempt", d.Attempt),
		ids.Name("tdd.allocation_id", d.AllocationId),
		ids.VertexID("tdd.task_information.job_vertex_id", d.TaskInformation.JobVertexId),
	}
	if k := d.JobInformation.JobBinaryKey; k != "" {
		errs = append(errs, ids.BlobKey("tdd.job_information.job_binary_key", k))
	}
	if d.Attempt != nil && d.Attempt.JobVertexId != d.TaskInformation.JobVertexId {
		errs = append(errs, &ids.Error{Field: "tdd.attempt.job_vertex_id", Value: d.Attempt.JobVertexId,
			Rule: "want the task's job_vertex_id " + d.TaskInformation.JobVertexId})
	}
	for _, p := range d.ProducedPartitions {
		errs = append(errs, ids.ResultID("tdd.produced_partitions.result_id", p.GetResultId()))
	}
	for _, g := range d.InputGates {
		errs = append(errs, ids.ResultID("tdd.input_gates.result_id", g.GetResultId()))
		if k := g.GetOffloadedBlobKey(); k != "" {
			errs = append(errs, ids.BlobKey("tdd.input_gates.offloaded_blob_key", k))
		}
		for _, sd := range g.GetInline().GetDescriptors() {
			errs = append(errs, checkAttempt("tdd.input_gates.shuffle_descriptors.producer", sd.Producer))
		}
	}
	return firstErr(errs...)
}
