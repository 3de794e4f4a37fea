package ha

import "sync"

// serial runs posted functions one at a time, in order, on its own
// goroutine: how contenders and retrieval listeners get their calls without
// blocking the ZooKeeper event handling. The queue is unbounded because a
// slow contender must not stall the election; it holds a few events at most.
type serial struct {
	mu     sync.Mutex
	queue  []func()
	closed bool
	wake   chan struct{}
	done   chan struct{}
}

func newSerial() *serial {
	s := &serial{wake: make(chan struct{}, 1), done: make(chan struct{})}
	go s.run()
	return s
}

// post queues f; after close it is dropped and post reports false.
func (s *serial) post(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.queue = append(s.queue, f)
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return true
}

// close runs what is queued, then stops; it returns when the goroutine
// ended. Idempotent. Must not be called from a posted function.
func (s *serial) close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	s.mu.Unlock()
	<-s.done
}

func (s *serial) run() {
	defer close(s.done)
	for range s.wake {
		for {
			s.mu.Lock()
			if len(s.queue) == 0 {
				closed := s.closed
				s.mu.Unlock()
				if closed {
					return
				}
				break
			}
			f := s.queue[0]
			s.queue[0] = nil
			s.queue = s.queue[1:]
			s.mu.Unlock()
			f()
		}
	}
}
