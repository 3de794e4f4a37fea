package taskmanager

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/internal/backoff"
	"github.com/gofl/gofl/internal/clock"
	"github.com/gofl/gofl/rpc/pb"
)

func TestCancelBeforeSubmitRefusesTheTask(t *testing.T) {
	c := newCluster(t, nil, nil, Config{})
	c.activeSlot("a1", 0, testJobID)
	a := attempt("late", 0, 0)
	// The cancel overtook the deployment on the way.
	if _, err := c.client.CancelTask(context.Background(), &pb.CancelTaskRequest{JobId: testJobID, Attempt: a}); err != nil {
		t.Fatal(err)
	}
	err := c.submit(testJobID, tdd(testJobID, "a1", "noop", "", a))
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), attemptKey(a)) || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("late submit = %v; want FAILED_PRECONDITION naming %s", err, attemptKey(a))
	}
	if s := c.snapshot(); len(s.Tasks) != 0 || s.Jobs[0].Tombstones != 1 {
		t.Fatalf("tasks %+v, jobs %+v", s.Tasks, s.Jobs)
	}
	// Another attempt runs; the refused one never reported a state, which
	// would have come first (updates of a job are sent in order).
	b := attempt("other", 0, 0)
	if err := c.submit(testJobID, tdd(testJobID, "a1", "noop", "", b)); err != nil {
		t.Fatal(err)
	}
	for {
		u := recv(t, c.jm.updates, "update")
		if attemptKey(u.Attempt) == attemptKey(a) {
			t.Fatalf("the cancelled attempt ran: %v", u)
		}
		if attemptKey(u.Attempt) == attemptKey(b) && u.State == StateFinished {
			break
		}
	}
}

func TestTombstonesExpireAndOutliveTheConnection(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	rm, jm := newFakeRM(), newFakeJM()
	rm.heartbeatTimeoutMs, jm.heartbeatTimeoutMs = 3_600_000, 3_600_000 // time moves; the peers stay
	c := newCluster(t, rm, jm, Config{Clock: clk, CancelTombstoneTTL: time.Minute})
	c.activeSlot("a1", 0, testJobID)
	a, b := attempt("x", 0, 0), attempt("y", 0, 0)
	for _, at := range []*pb.ExecutionAttemptID{a, b} {
		if _, err := c.client.CancelTask(context.Background(), &pb.CancelTaskRequest{JobId: testJobID, Attempt: at}); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(59 * time.Second)
	if err := c.submit(testJobID, tdd(testJobID, "a1", "noop", "", a)); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("submit within the TTL = %v", err)
	}
	clk.Advance(time.Second)
	if err := c.submit(testJobID, tdd(testJobID, "a1", "noop", "", a)); err != nil {
		t.Fatalf("submit after the TTL = %v", err)
	}
	if n := c.snapshot().Jobs[0].Tombstones; n != 0 {
		t.Fatalf("%d tombstones after the TTL", n)
	}
	c.states(a, 3)

	// A reconnect keeps them: a JobMaster told the attempt was not
	// running counts it as ended, so it must never start here later.
	resp, err := c.client.CancelTask(context.Background(), &pb.CancelTaskRequest{JobId: testJobID, Attempt: b})
	if err != nil || resp.Running {
		t.Fatalf("cancel of an attempt not here = %v, %v; want not running", resp, err)
	}
	if _, err := c.client.DisconnectJobManager(context.Background(), &pb.DisconnectJobManagerRequest{JobId: testJobID, Cause: "failover"}); err != nil {
		t.Fatal(err)
	}
	c.activeSlot("a2", 1, testJobID)
	if s := c.snapshot(); len(s.Jobs) != 1 || s.Jobs[0].Tombstones != 1 {
		t.Fatalf("jobs after reconnecting = %+v", s.Jobs)
	}
	if err := c.submit(testJobID, tdd(testJobID, "a2", "noop", "", b)); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("submit of a cancelled attempt on a new connection = %v", err)
	}
}

func TestTombstonesAreBounded(t *testing.T) {
	ts := newTombstones(time.Hour, 3)
	now := time.Unix(0, 0)
	for _, k := range []string{"a", "b", "c", "a", "d"} {
		ts.add(k, now)
	}
	if ts.len() != 3 || ts.has("a", now) || !ts.has("d", now) || !ts.has("b", now) {
		t.Fatalf("tombstones %v", ts.expires)
	}
	if ts.has("b", now.Add(time.Hour)) || ts.len() != 0 {
		t.Fatalf("tombstones after the TTL %v", ts.expires)
	}
}

func TestHeartbeatCarriesHeldPartitions(t *testing.T) {
	c := newCluster(t, nil, nil, Config{})
	c.activeSlot("a1", 0, testJobID)
	var want []string
	for i := range 2 {
		a := attempt("src", i, 0)
		d := tdd(testJobID, "a1", "noop", "", a)
		d.ProducedPartitions = []*pb.ResultPartitionDeploymentDescriptor{
			{ResultId: "r", PartitionIndex: int32(i), PartitionType: pb.ResultPartitionType_RESULT_PARTITION_TYPE_BLOCKING, NumberOfSubpartitions: 1}}
		if err := c.submit(testJobID, d); err != nil {
			t.Fatal(err)
		}
		c.states(a, 3)
		want = append(want, partitionKey("r", int32(i), a))
	}
	hb, err := c.client.HeartbeatFromJobManager(context.Background(), &pb.HeartbeatRequest{SenderId: "jm-1", JobId: testJobID})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range hb.Partitions {
		got = append(got, partitionKey(p.ResultId, p.PartitionIndex, p.Producer))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("heartbeat partitions %v; want %v", got, want)
	}
}

// TestRejectingJobMasterDoesNotSpin: a JobMaster that rejects this
// TaskManager (its registration or its offers) and a ResourceManager that
// re-requests the freed slot at once once made 1,404 reconnects in 17.6 s.
// Each round now waits out a growing, jittered pause on the TaskExecutor's
// clock, during which nothing reaches the JobMaster.
func TestRejectingJobMasterDoesNotSpin(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(*fakeJM)
	}{
		{"offers rejected", func(jm *fakeJM) { jm.accept = func(*pb.SlotOffer) bool { return false } }},
		{"registration rejected", func(jm *fakeJM) {
			jm.registerErr.Store(status.Error(codes.FailedPrecondition, "job has ended"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jm := newFakeJM()
			tc.setup(jm)
			start := time.Unix(1000, 0)
			clk := clock.NewFake(start)
			rm := newFakeRM()
			rm.heartbeatTimeoutMs = 3_600_000
			jm.heartbeatTimeoutMs = 3_600_000
			cfg := Config{Clock: clk, SlotTimeout: time.Hour, RegistrationBackoff: 100 * time.Millisecond, Rand: rand.New(rand.NewPCG(1, 2))}
			c := newCluster(t, rm, jm, cfg)
			const rounds = 10
			var pauses []time.Duration
			offers := 0
			for i := range rounds {
				// The ResourceManager asks again at once.
				if err := c.requestSlot("a"+string(rune('a'+i)), 0, testJobID); err != nil {
					t.Fatalf("round %d: %v", i, err)
				}
				if i > 0 {
					var until time.Time
					eventually(t, "the registration waits for its pause", func() bool {
						s := c.snapshot()
						if len(s.Jobs) == 1 {
							until = s.Jobs[0].PausedUntil
						}
						return !until.IsZero()
					})
					if n := len(jm.registers) + len(jm.offers); n != 0 {
						t.Fatalf("round %d: %d calls reached the JobMaster during the pause", i, n)
					}
					pauses = append(pauses, until.Sub(clk.Now()))
					clk.Advance(until.Sub(clk.Now()))
				}
				recv(t, jm.registers, "RegisterTaskManager")
				eventually(t, "the slot is free again", func() bool {
					s := c.snapshot()
					return s.Slots[0].AllocationID == "" && len(s.Jobs) == 0
				})
				for len(jm.offers) > 0 {
					<-jm.offers
					offers++
				}
			}
			// No extra calls: one registration (and at most one offer) a round.
			if n := len(jm.registers); n != 0 {
				t.Errorf("%d extra registrations", n)
			}
			if offers > rounds {
				t.Errorf("%d offers in %d rounds", offers, rounds)
			}
			// The pauses grow as the backoff says, jitter included.
			bc := backoff.Config{Initial: 100 * time.Millisecond, Max: MaxRegistrationBackoff}
			for i, p := range pauses {
				if lo := time.Duration(0.79 * float64(bc.Delay(i, func() float64 { return 0.5 }))); p < lo {
					t.Errorf("pause %d = %v; want at least %v (all %v)", i, p, lo, pauses)
				}
			}
			if elapsed := clk.Now().Sub(start); elapsed < 20*time.Second {
				t.Errorf("%d rounds took %v of the TaskExecutor's time; want backoff to spread them", rounds, elapsed)
			}
		})
	}
}

func TestResourceManagerRejectionsArePaced(t *testing.T) {
	rm := newFakeRM()
	rm.registerErr = func(n int) error {
		if n <= 4 {
			return status.Error(codes.Internal, "not ready")
		}
		return nil
	}
	addr, _ := serve(t, "127.0.0.1:0", func(s *grpc.Server) { pb.RegisterResourceManagerServiceServer(s, rm) })
	clk := clock.NewFake(time.Unix(1000, 0))
	te, _, _, _ := startTE(t, Config{ResourceManagerAddress: addr, Clock: clk, RegistrationBackoff: 100 * time.Millisecond})
	recv(t, rm.registers, "first registration")
	for i := 1; i <= 4; i++ {
		// Beside the registration's deadline (taskmanager.registration.timeout).
		eventually(t, "a paced retry is pending", func() bool { return clk.Pending() > 1 })
		if n := len(rm.registers); n != 0 {
			t.Fatalf("retry %d came without waiting", i)
		}
		next, _ := clk.Next()
		clk.Advance(next.Sub(clk.Now()))
		recv(t, rm.registers, "paced registration")
	}
	eventually(t, "registered", func() bool {
		s, err := te.Snapshot(context.Background())
		return err == nil && s.Registered
	})
}

// A SubmitTask retried after its answer was lost (or duplicated on the
// way) arrives when the attempt already ran: it must not run again, and
// the answer says it is there already, which the JobMaster takes as the
// acknowledgement it missed.
func TestRetriedSubmitOfAnAttemptThatRanIsNotRunAgain(t *testing.T) {
	c := newCluster(t, nil, nil, Config{})
	c.activeSlot("a1", 0, testJobID)
	a := attempt("once", 0, 0)
	if err := c.submit(testJobID, tdd(testJobID, "a1", "noop", "", a)); err != nil {
		t.Fatal(err)
	}
	if got := stateNames(c.states(a, 3)); got[len(got)-1] != StateFinished {
		t.Fatalf("states %v", got)
	}
	err := c.submit(testJobID, tdd(testJobID, "a1", "noop", "", a))
	if status.Code(err) != codes.AlreadyExists || !strings.Contains(err.Error(), attemptKey(a)) {
		t.Fatalf("resubmit = %v; want ALREADY_EXISTS naming %s", err, attemptKey(a))
	}
	// Nothing of it runs: the next update is another attempt's.
	b := attempt("next", 0, 0)
	if err := c.submit(testJobID, tdd(testJobID, "a1", "noop", "", b)); err != nil {
		t.Fatal(err)
	}
	if u := recv(t, c.jm.updates, "update"); attemptKey(u.Attempt) != attemptKey(b) {
		t.Fatalf("the resubmitted attempt ran again: %v", u)
	}
}
