package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/internal/backoff"
	"github.com/gofl/gofl/internal/clock"
	"github.com/gofl/gofl/internal/mailbox"
)

// script runs a mailbox's turns on the test goroutine, in order, and
// holds each outgoing call until the test answers it.
type script struct {
	turns []func()
	calls []*heldCall
}

type heldCall struct {
	call func(context.Context)
	then func()
}

func (s *script) Post(_ *mailbox.Mailbox, fn func()) { s.turns = append(s.turns, fn) }
func (s *script) Call(_ *mailbox.Mailbox, fn func()) { fn() }
func (s *script) Go(_ *mailbox.Mailbox, call func(context.Context), then func()) {
	s.calls = append(s.calls, &heldCall{call, then})
}

func (s *script) settle() {
	for len(s.turns) > 0 {
		fn := s.turns[0]
		s.turns = s.turns[1:]
		fn()
	}
}

// deliver lets the oldest held call run and its continuation follow.
func (s *script) deliver(t *testing.T) {
	t.Helper()
	if len(s.calls) == 0 {
		t.Fatal("no call in flight")
	}
	c := s.calls[0]
	s.calls = s.calls[1:]
	c.call(context.Background())
	c.then()
	s.settle()
}

type peer struct {
	got   []string
	fail  []error // answers for the next attempts; nil entries succeed
	tries int
}

func (p *peer) msg(what, key string, done *[]string) Message {
	return Message{What: what, Key: key,
		Call: func(context.Context) error {
			p.tries++
			if len(p.fail) > 0 {
				err := p.fail[0]
				p.fail = p.fail[1:]
				if err != nil {
					return err
				}
			}
			p.got = append(p.got, what)
			return nil
		},
		Done: func(err error) {
			if err != nil {
				*done = append(*done, what+": "+err.Error())
			} else {
				*done = append(*done, what+": ok")
			}
		}}
}

func newOutbox(cfg Config) (*Outbox, *script, *clock.Fake) {
	s := &script{}
	clk := clock.NewFake(time.Unix(0, 0))
	cfg.Clock = clk
	cfg.Backoff = backoff.Config{Initial: 100 * time.Millisecond, Max: time.Second, Jitter: -1}
	return New("tm-1", mailbox.NewWithExecutor(s), cfg, zerolog.Nop()), s, clk
}

func TestOneInFlightInOrder(t *testing.T) {
	o, s, _ := newOutbox(Config{})
	p := &peer{}
	var done []string
	o.Send(p.msg("submit", "", &done))
	o.Send(p.msg("cancel", "", &done))
	if len(s.calls) != 1 {
		t.Fatalf("%d calls in flight, want 1", len(s.calls))
	}
	s.deliver(t)
	s.deliver(t)
	if got := strings.Join(p.got, ","); got != "submit,cancel" {
		t.Fatalf("peer got %s", got)
	}
	if o.Len() != 0 || len(done) != 2 {
		t.Fatalf("len %d, done %v", o.Len(), done)
	}
}

func TestRetriesTransientErrorsWithBackoff(t *testing.T) {
	o, s, clk := newOutbox(Config{})
	unavailable := status.Error(codes.Unavailable, "connection refused")
	p := &peer{fail: []error{unavailable, unavailable, nil}}
	var done []string
	o.Send(p.msg("submit", "", &done))
	o.Send(p.msg("cancel", "", &done))
	s.deliver(t) // fails
	if len(s.calls) != 0 {
		t.Fatal("retried without pausing")
	}
	clk.Advance(99 * time.Millisecond)
	s.settle()
	if len(s.calls) != 0 {
		t.Fatal("retried before the backoff passed")
	}
	clk.Advance(time.Millisecond)
	s.settle()
	s.deliver(t) // fails again; the pause doubles
	clk.Advance(200 * time.Millisecond)
	s.settle()
	s.deliver(t) // succeeds
	s.deliver(t) // cancel, right away: success reset the backoff
	if got := strings.Join(p.got, ","); got != "submit,cancel" || p.tries != 4 {
		t.Fatalf("peer got %s in %d tries", got, p.tries)
	}
	if strings.Join(done, "|") != "submit: ok|cancel: ok" {
		t.Fatalf("done %v", done)
	}
}

func TestFinalErrorIsReportedAndQueueGoesOn(t *testing.T) {
	o, s, _ := newOutbox(Config{})
	p := &peer{fail: []error{status.Error(codes.FailedPrecondition, "no slot")}}
	var done []string
	o.Send(p.msg("submit", "", &done))
	o.Send(p.msg("free", "", &done))
	s.deliver(t)
	s.deliver(t)
	if len(done) != 2 || !strings.Contains(done[0], "submit to tm-1: rpc error: code = FailedPrecondition desc = no slot") || done[1] != "free: ok" {
		t.Fatalf("done %q", done)
	}
}

func TestDeadlinePassesWithClearError(t *testing.T) {
	o, s, clk := newOutbox(Config{Deadline: 250 * time.Millisecond})
	unavailable := status.Error(codes.Unavailable, "connection refused")
	p := &peer{fail: []error{unavailable, unavailable, unavailable}}
	var done []string
	o.Send(p.msg("heartbeat", "", &done))
	s.deliver(t)
	clk.Advance(100 * time.Millisecond)
	s.settle()
	s.deliver(t) // next pause (200 ms) would end past the deadline
	if len(done) != 1 {
		t.Fatalf("done %v", done)
	}
	if !strings.Contains(done[0], "deadline passed after 2 attempts") || !strings.Contains(done[0], "connection refused") {
		t.Fatalf("error %q should name the deadline, the attempts and the last cause", done[0])
	}
	_ = clk
}

func TestLatestValueWins(t *testing.T) {
	o, s, _ := newOutbox(Config{})
	p := &peer{}
	var done []string
	o.Send(p.msg("declare 5", "requirements", &done)) // goes in flight
	o.Send(p.msg("declare 4", "requirements", &done)) // queued
	o.Send(p.msg("declare 3", "requirements", &done)) // replaces 4
	s.deliver(t)
	s.deliver(t)
	if got := strings.Join(p.got, ","); got != "declare 5,declare 3" {
		t.Fatalf("peer got %s, want the in-flight value and then the newest", got)
	}
	if !errors.Is(errorOf(done, "declare 4"), ErrSuperseded) {
		t.Fatalf("done %v", done)
	}
}

func TestCloseFailsPendingAndIgnoresInFlightReply(t *testing.T) {
	o, s, _ := newOutbox(Config{})
	p := &peer{}
	var done []string
	o.Send(p.msg("submit", "", &done))
	o.Send(p.msg("cancel", "", &done))
	o.Close(fmt.Errorf("TaskManager tm-1 lost"))
	s.deliver(t) // the reply of the call that was in flight
	o.Send(p.msg("late", "", &done))
	if len(done) != 3 {
		t.Fatalf("done %v", done)
	}
	for _, d := range done {
		if !strings.Contains(d, "outbox: closed: TaskManager tm-1 lost") {
			t.Fatalf("%q should carry the close cause", d)
		}
	}
}

func errorOf(done []string, what string) error {
	for _, d := range done {
		if strings.HasPrefix(d, what+": ") && strings.Contains(d, ErrSuperseded.Error()) {
			return ErrSuperseded
		}
	}
	return nil
}

// A message that failed for good leaves no backoff behind: the next one's
// first retry comes after the initial pause, within its own deadline.
func TestNextMessageStartsWithAFreshBackoff(t *testing.T) {
	o, s, clk := newOutbox(Config{Deadline: 250 * time.Millisecond})
	unavailable := status.Error(codes.Unavailable, "connection refused")
	p := &peer{fail: []error{unavailable, unavailable, unavailable, nil}}
	var done []string
	o.Send(p.msg("first", "", &done))
	o.Send(p.msg("second", "", &done))
	s.deliver(t) // first: fails, pause 100 ms
	clk.Advance(100 * time.Millisecond)
	s.settle()
	s.deliver(t) // fails; the next pause (200 ms) passes its deadline: dropped
	s.deliver(t) // second: fails; its pause is 100 ms again, inside its deadline
	clk.Advance(100 * time.Millisecond)
	s.settle()
	s.deliver(t) // succeeds
	if len(done) != 2 || !strings.HasPrefix(done[0], "first: ") || done[1] != "second: ok" {
		t.Fatalf("done %q", done)
	}
}
