// Package heartbeat tracks when heartbeat targets were last heard from, as
// Flink's HeartbeatManager does. A Monitor lives on its owner's mailbox: the
// owner records responses with Seen and, on each heartbeat interval, sends
// requests to Targets and removes those Expired.
package heartbeat

import (
	"sort"
	"time"
)

// Monitor is not safe for concurrent use; its owner's goroutine uses it.
type Monitor[K comparable] struct {
	timeout time.Duration
	last    map[K]time.Time
}

// New returns a monitor that expires targets silent for timeout.
func New[K comparable](timeout time.Duration) *Monitor[K] {
	return &Monitor[K]{timeout: timeout, last: map[K]time.Time{}}
}

// Timeout is the configured heartbeat timeout.
func (m *Monitor[K]) Timeout() time.Duration { return m.timeout }

// Seen records a sign of life from k at now; it starts tracking k if needed.
func (m *Monitor[K]) Seen(k K, now time.Time) { m.last[k] = now }

// Remove stops tracking k.
func (m *Monitor[K]) Remove(k K) { delete(m.last, k) }

// Tracked reports whether k is tracked.
func (m *Monitor[K]) Tracked(k K) bool { _, ok := m.last[k]; return ok }

// Targets lists the tracked targets.
func (m *Monitor[K]) Targets() []K {
	out := make([]K, 0, len(m.last))
	for k := range m.last {
		out = append(out, k)
	}
	return out
}

// Expired removes and returns the targets not heard from within the timeout,
// oldest first.
func (m *Monitor[K]) Expired(now time.Time) []K {
	var out []K
	for k, t := range m.last {
		if now.Sub(t) > m.timeout {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return m.last[out[i]].Before(m.last[out[j]]) })
	for _, k := range out {
		delete(m.last, k)
	}
	return out
}
