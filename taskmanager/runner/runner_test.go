package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/internal/clustertest"
	"github.com/gofl/gofl/rpc/pb"
)

var testRunner string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gofl-runner-test")
	if err != nil {
		panic(err)
	}
	testRunner = filepath.Join(dir, "testrunner")
	build := exec.Command("go", "build", "-o", testRunner, "./internal/testrunner")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the test runner:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// startTimeout and waitLimit only bound a hang: a runner starts (and a
// state arrives) in well under a second, but a loaded machine running the
// race detector may take many.
const (
	startTimeout = 60 * time.Second
	waitLimit    = 60 * time.Second
)

func start(t *testing.T, args ...string) *Process {
	t.Helper()
	p, err := Start(context.Background(), Spec{JobID: "job1", Binary: testRunner, Args: args, Fingerprint: "fp1",
		Dir: shortDir(t), StartTimeout: startTimeout}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(2 * time.Second) })
	return p
}

// shortDir keeps Unix socket paths under the 108-byte limit.
func shortDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "gr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func submit(t *testing.T, p *Process, subtask int32, invokable, config string) (*pb.ExecutionAttemptID, <-chan *pb.RunnerTaskState) {
	t.Helper()
	a := &pb.ExecutionAttemptID{Graph: 1, JobVertexId: "v", SubtaskIndex: subtask}
	ch := p.Watch(a)
	t.Cleanup(func() { p.Unwatch(a) })
	err := p.Submit(context.Background(), &pb.SubmitTaskRequest{JobId: "job1", Tdd: &pb.TaskDeploymentDescriptor{
		Attempt: a, TaskInformation: &pb.TaskInformation{JobVertexId: "v", TaskName: "v", NumberOfSubtasks: 4, Invokable: invokable, Config: []byte(config)}}})
	if err != nil {
		t.Fatal(err)
	}
	return a, ch
}

func states(t *testing.T, ch <-chan *pb.RunnerTaskState, n int) []*pb.RunnerTaskState {
	t.Helper()
	var out []*pb.RunnerTaskState
	for len(out) < n {
		select {
		case st := <-ch:
			out = append(out, st)
		case <-time.After(waitLimit):
			t.Fatalf("got %d states, want %d", len(out), n)
		}
	}
	return out
}

func names(sts []*pb.RunnerTaskState) string {
	var s []string
	for _, st := range sts {
		s = append(s, st.State)
	}
	return strings.Join(s, " ")
}

func TestTasksRunInTheRunner(t *testing.T) {
	p := start(t)
	_, ch := submit(t, p, 0, "noop", "")
	if got := names(states(t, ch, 3)); got != "INITIALIZING RUNNING FINISHED" {
		t.Fatalf("noop: %s", got)
	}
	_, fails := submit(t, p, 1, "fail-after-n", `{"duration":"10ms","failAttempts":1}`)
	sts := states(t, fails, 3)
	if last := sts[2]; last.State != "FAILED" || last.Failure.GetType() != "recoverable" || !strings.Contains(last.Failure.GetMessage(), "on purpose") {
		t.Fatalf("fail-after-n: %v", sts)
	}
	a, sleeps := submit(t, p, 2, "sleep", `{"duration":"1h"}`)
	states(t, sleeps, 2)
	if err := p.Cancel(context.Background(), "job1", a); err != nil {
		t.Fatal(err)
	}
	if st := states(t, sleeps, 1)[0]; st.State != "CANCELED" {
		t.Fatalf("cancelled sleep: %v", st)
	}
	_, unknown := submit(t, p, 3, "no-such-task", "")
	if st := states(t, unknown, 1)[0]; st.State != "FAILED" || st.Failure.GetType() != "non-recoverable" {
		t.Fatalf("unknown invokable: %v", st)
	}
}

func TestKilledRunnerIsReported(t *testing.T) {
	p := start(t)
	_, ch := submit(t, p, 0, "sleep", `{"duration":"1h"}`)
	states(t, ch, 2)
	if err := syscall.Kill(p.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
	case <-time.After(waitLimit):
		t.Fatal("the runner's death was not noticed")
	}
	if !errors.Is(p.Err(), ErrRunnerExited) || !strings.Contains(p.Err().Error(), "killed") {
		t.Fatalf("exit error %v", p.Err())
	}
	if err := p.Submit(context.Background(), &pb.SubmitTaskRequest{JobId: "job1", Tdd: &pb.TaskDeploymentDescriptor{Attempt: &pb.ExecutionAttemptID{}}}); !errors.Is(err, ErrRunnerExited) {
		t.Fatalf("submitting to a dead runner: %v", err)
	}
}

func TestStartFailuresLeaveNothingRunning(t *testing.T) {
	for _, tc := range []struct {
		name   string
		binary string
		args   []string
		want   string
	}{
		{"protocol mismatch", testRunner, []string{"-protocol", "99"}, "this job binary speaks 99"},
		{"fingerprint mismatch", testRunner, []string{"-fingerprint", "other"}, "fingerprint mismatch"},
		{"not a runner", "/bin/false", nil, "exited before serving"},
		{"missing binary", "/nonexistent/job", nil, "starting /nonexistent/job"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Start(context.Background(), Spec{JobID: "job1", Binary: tc.binary, Args: tc.args, Fingerprint: "fp1",
				Dir: shortDir(t), StartTimeout: startTimeout}, zerolog.Nop())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
	out, _ := exec.Command("pgrep", "-f", testRunner).Output()
	if len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("runner processes left behind: %s", out)
	}
}

func TestStopEndsTheProcess(t *testing.T) {
	p, err := Start(context.Background(), Spec{JobID: "job1", Binary: testRunner, Dir: shortDir(t), StartTimeout: startTimeout}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	_, ch := submit(t, p, 0, "sleep", `{"duration":"1h"}`)
	states(t, ch, 2)
	p.Stop(2 * time.Second)
	select {
	case <-p.Exited():
	default:
		t.Fatal("Stop returned with the process alive")
	}
	if err := syscall.Kill(p.Pid(), 0); err == nil {
		t.Fatal("the runner process still exists")
	}
}

func TestUnresponsiveRunnerIsKilled(t *testing.T) {
	p, err := Start(context.Background(), Spec{JobID: "job1", Binary: testRunner, Fingerprint: "fp1", Dir: shortDir(t),
		StartTimeout: 10 * time.Second, HeartbeatInterval: 50 * time.Millisecond, HeartbeatTimeout: time.Second}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(2 * time.Second) })
	_, ch := submit(t, p, 0, "sleep", `{"duration":"1h"}`)
	states(t, ch, 2)
	if err := syscall.Kill(p.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(p.Pid(), syscall.SIGCONT)
		t.Fatal("a stopped runner was not killed")
	}
	if !errors.Is(p.Err(), ErrRunnerExited) || !errors.Is(p.Err(), ErrUnresponsive) || !strings.Contains(p.Err().Error(), "killed") {
		t.Fatalf("exit error %v", p.Err())
	}
}

func TestCheckpointsReachTheRunnerAndReportsComeBack(t *testing.T) {
	reports := make(chan *pb.RunnerCheckpointReport, 10)
	p, err := Start(context.Background(), Spec{JobID: "job1", Binary: testRunner, Args: []string{"-checkpoints"}, Fingerprint: "fp1",
		Dir: shortDir(t), StartTimeout: startTimeout, OnCheckpoint: func(r *pb.RunnerCheckpointReport) { reports <- r }}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(2 * time.Second) })
	a, ch := submit(t, p, 0, "sleep", `{"duration":"1h"}`)
	states(t, ch, 2) // INITIALIZING RUNNING
	ctx := context.Background()
	opts := &pb.CheckpointOptions{Type: pb.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT, TargetLocation: "file:///chk/7"}
	for id := int64(7); id <= 8; id++ {
		if err := p.TriggerCheckpoint(ctx, &pb.TriggerCheckpointRequest{JobId: "job1", Attempt: a, CheckpointId: id, Options: opts}); err != nil {
			t.Fatal(err)
		}
	}
	for id := int64(7); id <= 8; id++ {
		select {
		case r := <-reports:
			ack := r.GetAcknowledge()
			if ack == nil || ack.CheckpointId != id || attemptKey(ack.Attempt) != attemptKey(a) || string(ack.Operators[0].File.Inline) != "file:///chk/7" {
				t.Fatalf("report %v, want the acknowledgement of %d", r, id)
			}
		case <-time.After(waitLimit):
			t.Fatalf("no acknowledgement of checkpoint %d", id)
		}
	}
	if err := p.NotifyCheckpoint(ctx, &pb.NotifyCheckpointRequest{JobId: "job1", Attempt: a, CheckpointId: 8, Complete: true}); err != nil {
		t.Fatal(err)
	}
	other := &pb.ExecutionAttemptID{Graph: 1, JobVertexId: "v", SubtaskIndex: 3}
	err = p.TriggerCheckpoint(ctx, &pb.TriggerCheckpointRequest{JobId: "job1", Attempt: other, CheckpointId: 9})
	if code := status.Code(errors.Unwrap(err)); code != codes.NotFound {
		t.Fatalf("trigger of an unknown attempt: %v (%v)", err, code)
	}
}

func TestRunnerWithoutCheckpointsAnswersUnimplemented(t *testing.T) {
	p := start(t)
	a, ch := submit(t, p, 0, "sleep", `{"duration":"1h"}`)
	states(t, ch, 2)
	err := p.TriggerCheckpoint(context.Background(), &pb.TriggerCheckpointRequest{JobId: "job1", Attempt: a, CheckpointId: 1})
	if code := status.Code(errors.Unwrap(err)); code != codes.Unimplemented {
		t.Fatalf("trigger: %v (%v)", err, code)
	}
}

// A runner's exit is logged with what it cost: CPU time and peak RSS.
func TestRunnerExitIsLoggedWithItsResourceUsage(t *testing.T) {
	var buf clustertest.SyncBuffer
	p, err := Start(context.Background(), Spec{JobID: "job1", Binary: testRunner, Fingerprint: "fp1",
		Dir: shortDir(t), StartTimeout: startTimeout}, zerolog.New(&buf))
	if err != nil {
		t.Fatal(err)
	}
	p.Stop(2 * time.Second)
	select {
	case <-p.Exited():
	case <-time.After(waitLimit):
		t.Fatal("the runner did not exit")
	}
	var line string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, `"message":"job runner exited"`) {
			line = l
		}
	}
	for _, field := range []string{`"cpu_user":`, `"cpu_system":`, `"max_rss_kib":`, `"exit":`} {
		if !strings.Contains(line, field) {
			t.Errorf("exit log %q has no %s", line, field)
		}
	}
}
