package ha

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// zkRetriever follows one component's connection-info node. It reports
// "no leader" while the node is absent or this process's connection is
// suspended (Flink's ZooKeeperLeaderRetrievalDriver with ON_SUSPENDED).
type zkRetriever struct {
	s         *zkServices
	component string
	listener  LeaderRetrievalListener
	events    *serial
	quit      chan struct{}
	done      chan struct{}
	once      sync.Once
}

func (s *zkServices) LeaderRetriever(component string, listener LeaderRetrievalListener) (LeaderRetriever, error) {
	if err := validKey("component", component); err != nil {
		return nil, err
	}
	r := &zkRetriever{s: s, component: component, listener: listener, events: newSerial(),
		quit: make(chan struct{}), done: make(chan struct{})}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		r.events.close()
		return nil, ErrClosed
	}
	s.retrievers[r] = struct{}{}
	s.mu.Unlock()
	go r.run()
	return r, nil
}

func (r *zkRetriever) run() {
	defer close(r.done)
	states, unsubscribe := r.s.subscribe()
	defer unsubscribe()
	p := r.s.connectionInfoPath(r.component)
	var (
		last     LeaderInformation
		reported bool
	)
	report := func(info LeaderInformation) {
		if reported && info == last {
			return
		}
		last, reported = info, true
		r.events.post(func() { r.listener.NotifyLeaderAddress(info) })
	}
	for {
		var watch <-chan zk.Event
		var retry <-chan time.Time
		if !r.s.connected() {
			report(LeaderInformation{})
		} else if info, w, err := r.read(p); err != nil {
			r.s.log.Debug().Err(err).Str("component", r.component).Msg("ha: leader retrieval failed; retrying")
			retry = time.After(200 * time.Millisecond)
		} else {
			report(info)
			watch = w
		}
		select {
		case <-r.quit:
			return
		case <-states:
		case <-watch:
		case <-retry:
		}
	}
}

// read returns the published leader (empty if none) and a watch that fires
// when that changes.
func (r *zkRetriever) read(p string) (LeaderInformation, <-chan zk.Event, error) {
	data, _, watch, err := r.s.conn.GetW(p)
	if errors.Is(err, zk.ErrNoNode) {
		ok, _, watch, err := r.s.conn.ExistsW(p)
		if err != nil {
			return LeaderInformation{}, nil, err
		}
		if ok {
			return LeaderInformation{}, closedEvents, nil // appeared meanwhile: read again
		}
		return LeaderInformation{}, watch, nil
	}
	if err != nil {
		return LeaderInformation{}, nil, err
	}
	var info LeaderInformation
	if err := json.Unmarshal(data, &info); err != nil {
		return LeaderInformation{}, nil, fmt.Errorf("ha: connection info %s: %w", p, err)
	}
	return info, watch, nil
}

func (r *zkRetriever) Close() error {
	r.once.Do(func() {
		close(r.quit)
		<-r.done
		r.events.close()
		r.s.mu.Lock()
		delete(r.s.retrievers, r)
		r.s.mu.Unlock()
	})
	return nil
}
