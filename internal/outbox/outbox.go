// Package outbox delivers an endpoint's calls to one peer in order.
//
// Every endpoint (JobMaster, ResourceManager, TaskExecutor) sends to each
// peer through one Outbox: FIFO, one call in flight, each call retried with
// jittered exponential backoff until it succeeds, fails for good, or its
// deadline passes, which is reported to the sender as a clear error. Two
// calls sent in consecutive turns therefore reach the peer in that order
// (a CancelTask never overtakes its SubmitTask), and at most one goroutine
// per peer is busy with outgoing calls.
//
// Declarations whose newest value is all that matters (slot requirements)
// carry a Key: a queued message with the same key is replaced by the newer
// one, so the peer ends with the newest value and never works through a
// backlog of stale ones.
//
// An Outbox lives on its owner's mailbox: call its methods only from there;
// Done callbacks run there too. Time comes from an injected clock.Clock, so
// tests and the fault simulator control the retries.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/internal/backoff"
	"github.com/gofl/gofl/internal/clock"
	"github.com/gofl/gofl/internal/mailbox"
)

// Sentinel errors a message's Done may receive.
var (
	// ErrClosed: the outbox was closed (the peer is lost or the owner
	// stops) before the message was acknowledged; one that was in flight
	// may still have reached the peer.
	ErrClosed = errors.New("outbox: closed")
	// ErrSuperseded: a newer message with the same Key replaced it.
	ErrSuperseded = errors.New("outbox: superseded by a newer message")
	// ErrDeadline: retries did not succeed before the message's deadline;
	// it wraps the last attempt's error.
	ErrDeadline = errors.New("outbox: delivery deadline passed")
)

// Config of an Outbox. Zero fields take the defaults noted.
type Config struct {
	// CallTimeout bounds each attempt; default 10 s.
	CallTimeout time.Duration
	// Deadline is how long a message may take, retries included, counted
	// from Send; 0 means until it succeeds or the outbox closes.
	Deadline time.Duration
	// Backoff between attempts; see package backoff for its defaults.
	Backoff backoff.Config
	// Retryable tells transient errors (retried) from final ones (reported
	// at once); default Retryable.
	Retryable func(error) bool
	// Clock for backoff and deadlines; default clock.Real.
	Clock clock.Clock
	// Rand draws the jitter, uniform in [0, 1); default math/rand/v2.
	Rand func() float64
}

// Message is one call to the peer.
type Message struct {
	// What names the call in logs and errors, e.g. "SubmitTask 3f…/map/2/0".
	What string
	// Key, if not empty, makes the message latest-value-wins: sending
	// replaces a queued (not yet in flight) message with the same key.
	Key string
	// Deadline overrides Config.Deadline when not zero; negative means none.
	Deadline time.Duration
	// Call makes one attempt; it blocks until the peer answered or ctx
	// ended. It runs off the mailbox and must not touch the owner's state.
	Call func(ctx context.Context) error
	// Done, if not nil, runs once on the mailbox with the outcome: nil on
	// success, or an error wrapping ErrClosed, ErrSuperseded, ErrDeadline
	// or the final error Call returned.
	Done func(error)
}

// Outbox is one peer's queue; see the package doc.
type Outbox struct {
	peer  string
	mb    *mailbox.Mailbox
	cfg   Config
	clk   clock.Clock
	log   zerolog.Logger
	bo    *backoff.Backoff
	queue []*pending
	busy  bool // a call is in flight or a retry pause runs
	gen   uint64
	timer clock.Timer
	err   error // set once closed
}

type pending struct {
	Message
	expires time.Time // zero: never
	lastErr error
}

// New returns the outbox of peer (a name for logs) on mb.
func New(peer string, mb *mailbox.Mailbox, cfg Config, log zerolog.Logger) *Outbox {
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 10 * time.Second
	}
	if cfg.Retryable == nil {
		cfg.Retryable = Retryable
	}
	clk := clock.Or(cfg.Clock)
	return &Outbox{peer: peer, mb: mb, cfg: cfg, clk: clk, bo: backoff.New(cfg.Backoff, cfg.Rand),
		log: log.With().Str("peer", peer).Logger()}
}

// Retryable is the default classification: the peer could not be reached
// or did not answer in time (gRPC Unavailable, DeadlineExceeded, Aborted,
// ResourceExhausted, or a context deadline).
func Retryable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted, codes.ResourceExhausted:
		return true
	}
	return false
}

// Send queues m behind the messages already queued. Non-blocking. On a
// closed outbox, m.Done runs at once with ErrClosed.
func (o *Outbox) Send(m Message) {
	if o.err != nil {
		o.finish(&pending{Message: m}, fmt.Errorf("%s to %s: %w", m.What, o.peer, o.err))
		return
	}
	p := &pending{Message: m}
	d := o.cfg.Deadline
	if m.Deadline != 0 {
		d = m.Deadline
	}
	if d > 0 {
		p.expires = o.clk.Now().Add(d)
	}
	if m.Key != "" {
		for i, q := range o.queue {
			// queue[0] may be in flight; only waiting ones are replaced.
			if q.Key == m.Key && !(i == 0 && o.busy) {
				o.queue[i] = p
				o.finish(q, fmt.Errorf("%s to %s: %w", q.What, o.peer, ErrSuperseded))
				return
			}
		}
	}
	o.queue = append(o.queue, p)
	o.pump()
}

// Len is the number of messages not yet delivered, in flight included.
func (o *Outbox) Len() int { return len(o.queue) }

// Close fails every undelivered message with ErrClosed wrapping cause and
// makes later Sends fail at once; the reply of a call in flight is
// ignored. Idempotent.
func (o *Outbox) Close(cause error) {
	if o.err != nil {
		return
	}
	o.err = ErrClosed
	if cause != nil {
		o.err = fmt.Errorf("%w: %w", ErrClosed, cause)
	}
	o.gen++
	if o.timer != nil {
		o.timer.Stop()
	}
	q := o.queue
	o.queue, o.busy = nil, false
	for _, p := range q {
		o.finish(p, fmt.Errorf("%s to %s: %w", p.What, o.peer, o.err))
	}
}

func (o *Outbox) pump() {
	if o.busy || len(o.queue) == 0 || o.err != nil {
		return
	}
	p := o.queue[0]
	timeout := o.cfg.CallTimeout
	if !p.expires.IsZero() {
		left := p.expires.Sub(o.clk.Now())
		if left <= 0 {
			o.drop(p, o.expired(p))
			o.pump()
			return
		}
		timeout = min(timeout, left)
	}
	o.busy = true
	gen := o.gen
	mailbox.Go(o.mb, func(ctx context.Context) (struct{}, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return struct{}{}, p.Call(ctx)
	}, func(_ struct{}, err error) {
		if gen != o.gen {
			return // closed meanwhile
		}
		o.attempted(p, err)
	})
}

func (o *Outbox) attempted(p *pending, err error) {
	if err == nil {
		o.busy = false
		o.drop(p, nil)
		o.pump()
		return
	}
	p.lastErr = err
	if !o.cfg.Retryable(err) {
		o.busy = false
		o.drop(p, fmt.Errorf("%s to %s: %w", p.What, o.peer, err))
		o.pump()
		return
	}
	delay := o.bo.Next()
	if !p.expires.IsZero() && o.clk.Now().Add(delay).After(p.expires) {
		o.busy = false
		o.drop(p, o.expired(p))
		o.pump()
		return
	}
	o.log.Debug().Err(err).Str("call", p.What).Int("attempt", o.bo.Attempts()).Dur("retry_in", delay).Msg("outgoing call failed; retrying")
	gen := o.gen
	o.timer = o.clk.AfterFunc(delay, func() {
		o.mb.Post(func() {
			if gen != o.gen {
				return
			}
			o.busy = false
			o.pump()
		})
	})
}

func (o *Outbox) expired(p *pending) error {
	if p.lastErr == nil {
		return fmt.Errorf("%s to %s: %w before the first attempt", p.What, o.peer, ErrDeadline)
	}
	return fmt.Errorf("%s to %s: %w after %d attempts: %w", p.What, o.peer, ErrDeadline, o.bo.Attempts(), p.lastErr)
}

// drop removes p, the head of the queue, and reports its outcome. The
// next message starts with a fresh backoff: one that failed for good says
// nothing about the next.
func (o *Outbox) drop(p *pending, err error) {
	if len(o.queue) > 0 && o.queue[0] == p {
		o.queue[0] = nil
		o.queue = o.queue[1:]
	}
	o.bo.Reset()
	if err != nil {
		o.log.Warn().Err(err).Str("call", p.What).Msg("outgoing call failed for good")
	}
	o.finish(p, err)
}

func (o *Outbox) finish(p *pending, err error) {
	if p.Done != nil {
		p.Done(err)
	}
}
