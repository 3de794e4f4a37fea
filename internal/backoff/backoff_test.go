package backoff

import (
	"testing"
	"time"
)

func TestDelayGrowsAndCaps(t *testing.T) {
	c := Config{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2, Jitter: -1}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		if got := c.Delay(i, nil); got != w*time.Millisecond {
			t.Errorf("attempt %d: %v, want %v", i, got, w*time.Millisecond)
		}
	}
	if got := c.Delay(10000, nil); got != time.Second {
		t.Errorf("huge attempt: %v", got)
	}
}

func TestJitterStaysInBand(t *testing.T) {
	c := Config{Initial: time.Second, Max: time.Minute, Jitter: 0.5}
	lo, hi := c.Delay(0, func() float64 { return 0 }), c.Delay(0, func() float64 { return 0.999999 })
	if lo != 500*time.Millisecond || hi < 1499*time.Millisecond || hi > 1500*time.Millisecond {
		t.Fatalf("band [%v, %v], want [500ms, 1.5s]", lo, hi)
	}
	// Jitter never exceeds the cap.
	c = Config{Initial: time.Second, Max: time.Second, Jitter: 0.5}
	if d := c.Delay(3, func() float64 { return 0.99 }); d > time.Second {
		t.Fatalf("jittered past the cap: %v", d)
	}
}

func TestBackoffResets(t *testing.T) {
	b := New(Config{Initial: time.Millisecond, Jitter: -1}, nil)
	b.Next()
	b.Next()
	if b.Attempts() != 2 || b.Next() != 4*time.Millisecond {
		t.Fatal("third pause should be 4 ms")
	}
	b.Reset()
	if b.Next() != time.Millisecond {
		t.Fatal("after Reset the pause starts over")
	}
}
