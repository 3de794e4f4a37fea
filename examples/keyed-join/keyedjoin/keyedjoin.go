// Package keyedjoin is the pipeline of the keyed-join example: generated
// orders are joined with their payments by order id in tumbling event-time
// windows, and a KeyedProcess keeps a running total of paid amounts per
// user in ValueState. It lives in its own package so that tests can build
// exactly the pipeline the example runs.
package keyedjoin

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/gofl/gofl/stream"
)

// JobName is the name the example registers its job under.
const JobName = "keyed-join"

// Epoch is the event time of order 0: 2024-01-01T00:00:00Z in milliseconds.
const Epoch int64 = 1704067200000

// Order is placed by a user at Ts (milliseconds); Amount is in cents.
type Order struct {
	ID     int64
	User   string
	Amount int64
	Ts     int64
}

// Payment pays (part of) an order at Ts.
type Payment struct {
	OrderID int64
	Method  string
	Amount  int64
	Ts      int64
}

// Paid is an order joined with one of its payments.
type Paid struct {
	User    string
	OrderID int64
	Method  string
	Amount  int64
	PaidTs  int64
}

// Total is one update of a user's running total: the payment that changed
// it and the total after it.
type Total struct {
	Paid
	Total int64
}

// String is the output line: "user paid_ts order_id method amount total".
func (t Total) String() string {
	return fmt.Sprintf("%s %d %d %s %d %d", t.User, t.PaidTs, t.OrderID, t.Method, t.Amount, t.Total)
}

// Config describes the generated data and the job.
type Config struct {
	// Orders is the number of orders (IDs 0..Orders-1), one every Step.
	Orders int64
	Users  int
	Step   time.Duration
	// Window is the size of the tumbling join windows.
	Window time.Duration
	// Parallelism of every operator; 0 keeps the environment's default.
	Parallelism int
	// Output is the directory of the part files; "" prints instead.
	Output string
}

// DefaultConfig: 5 000 orders of 7 users, one per second, joined in
// one-minute windows.
func DefaultConfig() Config {
	return Config{Orders: 5000, Users: 7, Step: time.Second, Window: time.Minute}
}

// MaxPaymentDelay bounds how long after its order a payment comes; it is
// also the payments' out-of-orderness.
const MaxPaymentDelay = 7 * time.Second

// OrderAt is order i.
func (c Config) OrderAt(i int64) Order {
	return Order{
		ID:     i,
		User:   fmt.Sprintf("user-%d", (i*5+i/7)%int64(c.Users)),
		Amount: 100 + (i*37)%900,
		Ts:     Epoch + (time.Duration(i) * c.Step).Milliseconds(),
	}
}

// PaymentsFor lists the payments of order i: none for i%10 == 3 (unpaid),
// two (card and voucher, the second a second later) for i%10 == 7, one
// otherwise. A payment comes 0..5 s after its order, so some fall into the
// next window than their order's and do not join.
func (c Config) PaymentsFor(i int64) []Payment {
	o := c.OrderAt(i)
	delay := ((i * 7) % 6) * 1000
	switch i % 10 {
	case 3:
		return nil
	case 7:
		half := o.Amount / 2
		return []Payment{
			{OrderID: i, Method: "card", Amount: half, Ts: o.Ts + delay},
			{OrderID: i, Method: "voucher", Amount: o.Amount - half, Ts: o.Ts + delay + 1000},
		}
	}
	method := [...]string{"card", "paypal", "transfer"}[i%3]
	return []Payment{{OrderID: i, Method: method, Amount: o.Amount, Ts: o.Ts + delay}}
}

// Build adds the pipeline to env:
//
//	orders   ─ timestamps ─ KeyBy(ID) ──────┐
//	                                        ├ Join (tumbling event time) ─ KeyBy(User) ─ KeyedProcess(running total) ─ sink
//	payments ─ timestamps ─ KeyBy(OrderID) ─┘
//
// The running total applies a user's payments in event-time order
// (payment time, then order id, then method), not in arrival order: the
// KeyedProcess buffers them in ValueState and applies them when the
// watermark passes, so the totals are the same at every parallelism.
func Build(env *stream.Environment, c Config) error {
	if c.Orders < 0 || c.Users < 1 || c.Step <= 0 || c.Window <= 0 {
		return fmt.Errorf("keyed-join: bad configuration %+v", c)
	}
	if c.Parallelism > 0 {
		env.SetParallelism(c.Parallelism)
	}
	orders := stream.Generate(env, c.Orders, c.OrderAt).Name("Orders").
		AssignTimestampsAndWatermarks(stream.MonotonousTimestamps(func(o Order) int64 { return o.Ts }))
	ids := stream.Generate(env, c.Orders, func(i int64) int64 { return i }).Name("Order IDs")
	payments := stream.FlatMap(ids, func(i int64, out stream.Collector[Payment]) error {
		for _, p := range c.PaymentsFor(i) {
			out.Collect(p)
		}
		return nil
	}).Name("Payments").
		AssignTimestampsAndWatermarks(stream.BoundedOutOfOrderness(MaxPaymentDelay, func(p Payment) int64 { return p.Ts }))

	paid := stream.Join(
		stream.KeyBy(orders, func(o Order) int64 { return o.ID }),
		stream.KeyBy(payments, func(p Payment) int64 { return p.OrderID }),
		stream.TumblingEventTime(c.Window),
		func(o Order, p Payment) Paid {
			return Paid{User: o.User, OrderID: o.ID, Method: p.Method, Amount: p.Amount, PaidTs: p.Ts}
		}).Name("Join Orders/Payments")

	// pending holds a user's joined pairs with their timestamps (their
	// window's MaxTimestamp) until the watermark passes them.
	type pendingPaid struct {
		Paid
		ts int64
	}
	pending := stream.NewValueState[[]pendingPaid]("pending")
	total := stream.NewValueState[int64]("total")
	totals := stream.KeyedProcess(stream.KeyBy(paid, func(p Paid) string { return p.User }), stream.KeyedProcessFunction[string, Paid, string]{
		ProcessElement: func(ctx *stream.KeyedContext[string], p Paid, _ stream.Collector[string]) error {
			ts, ok := ctx.Timestamp()
			if !ok {
				return errors.New("join result without a timestamp")
			}
			l, _ := pending.Value(ctx)
			pending.Update(ctx, append(l, pendingPaid{p, ts}))
			// Join results carry their window's MaxTimestamp: once the
			// watermark passes it, every pair of that window has arrived.
			ctx.RegisterEventTimeTimer(ts)
			return nil
		},
		OnTimer: func(ctx *stream.KeyedContext[string], now int64, out stream.Collector[string]) error {
			// Apply the pairs the watermark has passed; pairs of later
			// windows (from faster join subtasks) wait for their timer.
			all, _ := pending.Value(ctx)
			var l, rest []pendingPaid
			for _, p := range all {
				if p.ts <= now {
					l = append(l, p)
				} else {
					rest = append(rest, p)
				}
			}
			if len(rest) > 0 {
				pending.Update(ctx, rest)
			} else {
				pending.Clear(ctx)
			}
			sort.Slice(l, func(i, j int) bool {
				a, b := l[i], l[j]
				if a.PaidTs != b.PaidTs {
					return a.PaidTs < b.PaidTs
				}
				if a.OrderID != b.OrderID {
					return a.OrderID < b.OrderID
				}
				return a.Method < b.Method
			})
			t, _ := total.Value(ctx)
			for _, p := range l {
				t += p.Amount
				out.Collect(Total{Paid: p.Paid, Total: t}.String())
			}
			total.Update(ctx, t)
			return nil
		},
	}).Name("Running Total")
	if c.Output != "" {
		totals.WriteAsText(c.Output).Name("Totals")
	} else {
		totals.Print().Name("Totals")
	}
	return nil
}

// Job is the registered builder: it parses the job arguments into a Config
// and builds it.
func Job(env *stream.Environment, args []string) error {
	c := DefaultConfig()
	fs := flag.NewFlagSet(JobName, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Int64Var(&c.Orders, "orders", c.Orders, "number of orders to generate")
	fs.IntVar(&c.Users, "users", c.Users, "number of users")
	fs.IntVar(&c.Parallelism, "parallelism", c.Parallelism, "parallelism of every operator (0: the default)")
	fs.DurationVar(&c.Step, "step", c.Step, "event-time distance between consecutive orders")
	fs.DurationVar(&c.Window, "window", c.Window, "tumbling join window size")
	fs.StringVar(&c.Output, "output", "", "output directory (default: print)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w (usage: keyed-join [--orders N] [--parallelism P] [--output DIR] ...)", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return Build(env, c)
}
