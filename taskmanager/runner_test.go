package taskmanager

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gofl/gofl/rpc/pb"
)

// runnerWait bounds waits that involve starting or killing job runner
// processes, generous for a loaded machine.
const runnerWait = 60 * time.Second

// runnerTDD is a deployment of a built-in invokable run in the job's
// runner (the test runner as job binary).
func runnerTDD(job, alloc, binary, inv, config string, a *pb.ExecutionAttemptID) *pb.TaskDeploymentDescriptor {
	d := tdd(job, alloc, inv, config, a)
	d.JobInformation.JobBinaryKey = binary
	return d
}

// runnerPID is the process ID of the job's runner here, 0 if none runs.
func (c *cluster) runnerPID(job string) int {
	if p := c.te.exec.(*processTaskRunner).pool.running(job); p != nil {
		return p.Pid()
	}
	return 0
}

// dataPID asks whoever listens on a data address for its process ID (the
// test runner answers with it).
func dataPID(t *testing.T, addr string) int {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dialing the data address %s: %v", addr, err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(runnerWait))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Fatalf("reading from the data address %s: %v", addr, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("data address %s answered %q", addr, line)
	}
	return pid
}

// statesWithin is cluster.states with a longer wait.
func (c *cluster) statesWithin(a *pb.ExecutionAttemptID, n int, d time.Duration) []*pb.UpdateTaskExecutionStateRequest {
	c.t.Helper()
	var out []*pb.UpdateTaskExecutionStateRequest
	deadline := time.After(d)
	for len(out) < n {
		select {
		case u := <-c.jm.updates:
			if attemptKey(u.Attempt) == attemptKey(a) {
				out = append(out, u)
			}
		case <-deadline:
			c.t.Fatalf("got %d states of %s, want %d", len(out), attemptKey(a), n)
		}
	}
	return out
}

func TestFrozenRunnerIsKilledAndItsPartitionsReportedLost(t *testing.T) {
	c := newCluster(t, nil, nil, Config{ResourceID: "tm-a", HeartbeatTimeout: 3 * time.Second, HeartbeatInterval: 100 * time.Millisecond})
	bin := c.jobBinary()
	c.activeSlot("a1", 0, testJobID)
	reg := recv(t, c.jm.registers, "RegisterTaskManager")

	producer := attempt("producer", 0, 0)
	d := runnerTDD(testJobID, "a1", bin, "noop", "", producer)
	d.ProducedPartitions = []*pb.ResultPartitionDeploymentDescriptor{
		{ResultId: "r1", PartitionIndex: 0, PartitionType: pb.ResultPartitionType_RESULT_PARTITION_TYPE_BLOCKING, NumberOfSubpartitions: 1}}
	if err := c.submit(testJobID, d); err != nil {
		t.Fatal(err)
	}
	if got := c.statesWithin(producer, 3, runnerWait)[2].State; got != StateFinished {
		t.Fatalf("producer ended %s", got)
	}
	sleeper := attempt("sleeper", 0, 0)
	if err := c.submit(testJobID, runnerTDD(testJobID, "a1", bin, "sleep", `{"duration":"1h"}`, sleeper)); err != nil {
		t.Fatal(err)
	}
	c.statesWithin(sleeper, 2, runnerWait)
	hb, err := c.client.HeartbeatFromJobManager(context.Background(), &pb.HeartbeatRequest{SenderId: "jm-1", JobId: testJobID})
	if err != nil || len(hb.Partitions) != 1 || hb.Partitions[0].ResultId != "r1" {
		t.Fatalf("heartbeat = %v, %v", hb, err)
	}
	pid := c.runnerPID(testJobID)
	if pid == 0 {
		t.Fatal("no runner")
	}
	// The runner listens on the data address the JobMaster was given.
	if got := dataPID(t, reg.Location.DataAddress); got != pid {
		t.Fatalf("data address %s is served by %d, the runner is %d", reg.Location.DataAddress, got, pid)
	}

	// Freeze it: the TaskManager notices the silence and kills it.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	u := c.statesWithin(sleeper, 1, runnerWait)[0]
	if f := u.Failure; u.State != StateFailed || f.GetType() != "environment" || !strings.Contains(f.GetMessage(), "stopped heartbeating") {
		t.Fatalf("the frozen runner's task: %v", u)
	}
	var lost *pb.ReportPartitionsLostRequest
	select {
	case lost = <-c.jm.lost:
	case <-time.After(runnerWait):
		t.Fatal("no ReportPartitionsLost")
	}
	if lost.JobId != testJobID || lost.ResourceId != "tm-a" || len(lost.Partitions) != 1 ||
		partitionKey(lost.Partitions[0].ResultId, lost.Partitions[0].PartitionIndex, lost.Partitions[0].Producer) != partitionKey("r1", 0, producer) ||
		!strings.Contains(lost.Cause, "stopped heartbeating") {
		t.Fatalf("ReportPartitionsLost = %v", lost)
	}
	hb, err = c.client.HeartbeatFromJobManager(context.Background(), &pb.HeartbeatRequest{SenderId: "jm-1", JobId: testJobID})
	if err != nil || len(hb.Partitions) != 0 {
		t.Fatalf("heartbeat after the loss = %v, %v", hb, err)
	}

	// The next task gets a new runner, on the same data address.
	next := attempt("next", 0, 0)
	if err := c.submit(testJobID, runnerTDD(testJobID, "a1", bin, "noop", "", next)); err != nil {
		t.Fatal(err)
	}
	c.statesWithin(next, 3, runnerWait)
	pid2 := c.runnerPID(testJobID)
	if pid2 == 0 || pid2 == pid {
		t.Fatalf("runner %d after runner %d died", pid2, pid)
	}
	if got := dataPID(t, reg.Location.DataAddress); got != pid2 {
		t.Fatalf("data address %s is served by %d, the runner is %d", reg.Location.DataAddress, got, pid2)
	}
	if s := c.snapshot(); s.Jobs[0].DataAddress != reg.Location.DataAddress {
		t.Fatalf("data address changed to %s", s.Jobs[0].DataAddress)
	}
}

// TestReconnectAdvertisesTheRunnersDataAddress: after the JobMaster
// connection is replaced, the address in the new registration is where
// the runner that runs the job's next tasks listens.
func TestReconnectAdvertisesTheRunnersDataAddress(t *testing.T) {
	c := newCluster(t, nil, nil, Config{})
	bin := c.jobBinary()
	for round, alloc := range []string{"a1", "a2", "a3"} {
		c.activeSlot(alloc, 0, testJobID)
		reg := recv(t, c.jm.registers, "RegisterTaskManager")
		a := attempt("task", round, 0)
		if err := c.submit(testJobID, runnerTDD(testJobID, alloc, bin, "noop", "", a)); err != nil {
			t.Fatal(err)
		}
		c.statesWithin(a, 3, runnerWait)
		pid := c.runnerPID(testJobID)
		if got := dataPID(t, reg.Location.DataAddress); pid == 0 || got != pid {
			t.Fatalf("round %d: the JobMaster was given %s, served by %d; the job's runner is %d", round, reg.Location.DataAddress, got, pid)
		}
		// The JobMaster goes away and comes back at once.
		if _, err := c.client.DisconnectJobManager(context.Background(), &pb.DisconnectJobManagerRequest{JobId: testJobID, Cause: "JobMaster failover"}); err != nil {
			t.Fatal(err)
		}
	}
}
