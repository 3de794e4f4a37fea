package faultsim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/internal/backoff"
	"github.com/gofl/gofl/internal/mailbox"
	"github.com/gofl/gofl/internal/outbox"
	"github.com/gofl/gofl/rpc/pb"
)

// recordingTE is a TaskExecutorService that logs what reaches it.
type recordingTE struct {
	pb.UnimplementedTaskExecutorServiceServer
	got []string
}

func (r *recordingTE) SubmitTask(_ context.Context, req *pb.SubmitTaskRequest) (*pb.Ack, error) {
	r.got = append(r.got, "submit")
	return &pb.Ack{}, nil
}

func (r *recordingTE) CancelTask(_ context.Context, req *pb.CancelTaskRequest) (*pb.CancelTaskResponse, error) {
	r.got = append(r.got, "cancel")
	return &pb.CancelTaskResponse{}, nil
}

var hostile = Faults{Drop: 0.3, Duplicate: 0.3, MinLatency: time.Millisecond, MaxLatency: 50 * time.Millisecond, Late: 0.1, LateLatency: 2 * time.Second}

// sendPair sends SubmitTask and CancelTask in two consecutive turns, either
// through one outbox or each on its own call, and returns what the
// receiver saw first.
func sendPair(seed uint64, useOutbox bool) (first string, trace []string) {
	s := New(seed, hostile, time.Second)
	jmNode, teNode := s.AddNode("jm"), s.AddNode("tm")
	rec := &recordingTE{}
	s.Serve(teNode, "tm:1", &pb.TaskExecutorService_ServiceDesc, rec)
	client := pb.NewTaskExecutorServiceClient(s.Conn(jmNode, "tm:1"))
	mb := mailbox.NewWithExecutor(jmNode.Executor())
	ob := outbox.New("tm", mb, outbox.Config{Clock: s.Clock, CallTimeout: time.Second,
		Backoff: backoff.Config{Initial: 10 * time.Millisecond}, Rand: s.Rand.Float64}, zerolog.Nop())
	send := func(what string, call func(ctx context.Context) error) {
		if useOutbox {
			ob.Send(outbox.Message{What: what, Call: call})
			return
		}
		mailbox.Go(mb, func(ctx context.Context) (struct{}, error) { return struct{}{}, call(ctx) }, func(struct{}, error) {})
	}
	mb.Post(func() {
		send("submit", func(ctx context.Context) error { _, err := client.SubmitTask(ctx, &pb.SubmitTaskRequest{}); return err })
	})
	mb.Post(func() {
		send("cancel", func(ctx context.Context) error { _, err := client.CancelTask(ctx, &pb.CancelTaskRequest{}); return err })
	})
	s.RunUntil(s.Clock.Now().Add(time.Minute), func() bool { return false })
	if len(rec.got) == 0 {
		return "", s.Trace()
	}
	return rec.got[0], append(s.Trace(), strings.Join(rec.got, ","))
}

func TestOutboxKeepsOrderUnderHostileNetwork(t *testing.T) {
	reordered := 0
	for seed := uint64(1); seed <= 300; seed++ {
		if first, _ := sendPair(seed, false); first == "cancel" {
			reordered++
		}
		first, trace := sendPair(seed, true)
		if first != "submit" {
			t.Fatalf("seed %d: through an outbox the receiver first saw %q\n%s", seed, first, strings.Join(trace, "\n"))
		}
	}
	// The simulated network does reorder calls that are not ordered.
	if reordered == 0 {
		t.Fatal("without an outbox no seed reordered the calls: the simulation injects no reordering")
	}
	t.Logf("without an outbox %d of 300 seeds reordered", reordered)
}

func TestSameSeedSameRun(t *testing.T) {
	for _, seed := range []uint64{3, 77, 1234} {
		_, a := sendPair(seed, true)
		_, b := sendPair(seed, true)
		if !slices.Equal(a, b) {
			t.Fatalf("seed %d is not reproducible:\n%s\n---\n%s", seed, strings.Join(a, "\n"), strings.Join(b, "\n"))
		}
	}
}

func TestCrashedNodeRefusesAndForgets(t *testing.T) {
	s := New(1, Faults{MinLatency: time.Millisecond, MaxLatency: time.Millisecond}, time.Second)
	a, b := s.AddNode("a"), s.AddNode("b")
	rec := &recordingTE{}
	s.Serve(b, "b:1", &pb.TaskExecutorService_ServiceDesc, rec)
	client := pb.NewTaskExecutorServiceClient(s.Conn(a, "b:1"))
	mb := mailbox.NewWithExecutor(a.Executor())
	var errs []string
	call := func() {
		mailbox.Go(mb, func(ctx context.Context) (*pb.Ack, error) { return client.SubmitTask(ctx, &pb.SubmitTaskRequest{}) },
			func(_ *pb.Ack, err error) { errs = append(errs, fmt.Sprint(err)) })
	}
	mb.Post(call)
	s.RunUntil(s.Clock.Now().Add(time.Second), func() bool { return len(errs) == 1 })
	b.Crash()
	mb.Post(call)
	s.RunUntil(s.Clock.Now().Add(time.Second), func() bool { return len(errs) == 2 })
	if errs[0] != "<nil>" || !strings.Contains(errs[1], "connection refused") || len(rec.got) != 1 {
		t.Fatalf("errs %q, delivered %v", errs, rec.got)
	}
	// A crashed caller hears nothing back.
	mb.Post(call)
	a.Crash()
	s.RunUntil(s.Clock.Now().Add(time.Second), func() bool { return false })
	if len(errs) != 2 {
		t.Fatalf("a crashed node ran a continuation: %q", errs)
	}
}
