package clock

import (
	"testing"
	"time"
)

func TestFakeFiresInDeadlineOrder(t *testing.T) {
	start := time.Unix(1000, 0)
	c := NewFake(start)
	var got []string
	c.AfterFunc(3*time.Second, func() { got = append(got, "c") })
	c.AfterFunc(time.Second, func() {
		got = append(got, "a")
		c.AfterFunc(time.Second, func() { got = append(got, "b") }) // due at 2 s, inside the advance
	})
	stopped := c.AfterFunc(2*time.Second, func() { got = append(got, "stopped") })
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop should report true once, then false")
	}
	c.Advance(2500 * time.Millisecond)
	if want := "a,b"; join(got) != want {
		t.Fatalf("fired %q, want %q", join(got), want)
	}
	if !c.Now().Equal(start.Add(2500 * time.Millisecond)) {
		t.Fatalf("now = %v", c.Now())
	}
	if !c.Step() || join(got) != "a,b,c" || !c.Now().Equal(start.Add(3*time.Second)) {
		t.Fatalf("step: fired %q at %v", join(got), c.Now())
	}
	if c.Step() {
		t.Fatal("Step with nothing pending should report false")
	}
}

func TestFakeResetRearms(t *testing.T) {
	c := NewFake(time.Unix(0, 0))
	n := 0
	tm := c.AfterFunc(time.Second, func() { n++ })
	if !tm.Reset(5 * time.Second) {
		t.Fatal("Reset of a pending timer should report true")
	}
	c.Advance(4 * time.Second)
	if n != 0 {
		t.Fatal("fired before its reset deadline")
	}
	c.Advance(time.Second)
	if n != 1 {
		t.Fatalf("fired %d times, want 1", n)
	}
	if tm.Reset(time.Second) {
		t.Fatal("Reset of a fired timer should report false")
	}
	c.Advance(time.Second)
	if n != 2 || c.Pending() != 0 {
		t.Fatalf("fired %d times, %d pending", n, c.Pending())
	}
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

// Armed is closed by the next timer set, and at once while one is pending.
func TestFakeArmed(t *testing.T) {
	c := NewFake(time.Unix(0, 0))
	armed := c.Armed()
	select {
	case <-armed:
		t.Fatal("Armed closed with no timer pending")
	default:
	}
	go c.AfterFunc(time.Second, func() {})
	select {
	case <-armed:
	case <-time.After(time.Minute):
		t.Fatal("Armed not closed by AfterFunc")
	}
	select {
	case <-c.Armed():
	default:
		t.Fatal("Armed not closed while a timer is pending")
	}
}
