package heartbeat

import (
	"reflect"
	"testing"
	"time"
)

func TestExpired(t *testing.T) {
	m := New[string](time.Second)
	t0 := time.Unix(1000, 0)
	m.Seen("a", t0)
	m.Seen("b", t0.Add(500*time.Millisecond))
	m.Seen("c", t0.Add(900*time.Millisecond))
	if got := m.Expired(t0.Add(time.Second)); len(got) != 0 {
		t.Fatalf("expired at exactly the timeout: %v", got)
	}
	if got := m.Expired(t0.Add(1600 * time.Millisecond)); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("Expired = %v, want [a b]", got)
	}
	if m.Tracked("a") || !m.Tracked("c") {
		t.Fatal("expired targets must be removed, others kept")
	}
	m.Seen("c", t0.Add(2*time.Second))
	if got := m.Expired(t0.Add(2500 * time.Millisecond)); len(got) != 0 {
		t.Fatalf("a refreshed target expired: %v", got)
	}
	m.Remove("c")
	if len(m.Targets()) != 0 {
		t.Fatal("Remove left a target")
	}
}
