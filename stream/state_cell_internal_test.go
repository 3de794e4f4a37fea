package stream

import (
	"testing"

	"github.com/gofl/gofl/stream/runtime"
)

// scopeOnly is a StateContext over a bare backend.
type scopeOnly struct{ s *stateScope }

func (c scopeOnly) keyedState() *stateScope { return c.s }

// A ValueState update overwrites its value in place (no allocation per
// update, where boxing the new value allocated), and a snapshot in flight
// keeps the value of its barrier while updates go on.
func TestValueStateUpdatesInPlace(t *testing.T) {
	b := runtime.NewKeyedStateBackend(128)
	b.SetKeyCodec(keyCodecOf[int64]().c)
	ctx := scopeOnly{&stateScope{backend: b, ctx: &runtime.Context{OperatorName: "count", Checkpointing: true}}}
	count := NewValueState[int64]("count")
	b.SetCurrentKey(int64(1000))
	count.Update(ctx, 1000)
	if n := testing.AllocsPerRun(100, func() {
		c, _ := count.Value(ctx)
		count.Update(ctx, c+1)
	}); n != 0 {
		t.Errorf("an update allocates %.1f times, want 0", n)
	}
	at, _ := count.Value(ctx)
	snap := &runtime.OperatorSnapshot{}
	if err := b.SnapshotAsync(snap); err != nil {
		t.Fatal(err)
	}
	count.Update(ctx, at+7)
	if err := snap.Materialize(); err != nil {
		t.Fatal(err)
	}
	if got, _ := count.Value(ctx); got != at+7 {
		t.Fatalf("the task reads %d after the update, want %d", got, at+7)
	}
	r := runtime.NewKeyedStateBackend(128)
	r.SetKeyCodec(keyCodecOf[int64]().c)
	if err := r.Restore(&runtime.OperatorRestore{Keyed: snap.Keyed, StateTypes: snap.StateTypes}); err != nil {
		t.Fatal(err)
	}
	rctx := scopeOnly{&stateScope{backend: r, ctx: &runtime.Context{OperatorName: "count", Checkpointing: true}}}
	r.SetCurrentKey(int64(1000))
	if got, ok := count.Value(rctx); !ok || got != at {
		t.Fatalf("the snapshot holds %d (%v), want %d: the value at its barrier", got, ok, at)
	}
}
