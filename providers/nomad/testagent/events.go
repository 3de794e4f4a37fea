package testagent

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
)

// eventBufferSize bounds the replayable event history (Nomad's
// event_buffer_size defaults to 100; this agent keeps more).
const eventBufferSize = 1024

// Event types the agent publishes, as Nomad names them.
const (
	evPlanResult    = "PlanResult"                    // a placement or a server-side stop
	evAllocUpdated  = "AllocationUpdated"             // a client update
	evDesiredStatus = "AllocationUpdateDesiredStatus" // alloc stop's migrate transition
	evEvalUpdated   = "EvaluationUpdated"
)

// clientSyncInterval is how long client updates of an allocation are
// bundled into one event (a Nomad client syncs allocations every 200ms).
const clientSyncInterval = 200 * time.Millisecond

// eventBroker keeps recent events; it is guarded by Agent.mu and streams
// wake on Agent.notify.
type eventBroker struct {
	log   []streamEvent
	dirty map[*allocState]bool // client updates not published yet
	flush *time.Timer          // publishes dirty; nil when none is due
}

type streamEvent struct {
	Topic      string
	Type       string
	Key        string
	Namespace  string
	FilterKeys []string
	Index      uint64
	Payload    map[string]json.RawMessage
}

func newEventBroker() *eventBroker { return &eventBroker{dirty: map[*allocState]bool{}} }

// close stops a pending flush (under Agent.mu).
func (b *eventBroker) close() {
	if b.flush != nil {
		b.flush.Stop()
		b.flush = nil
	}
}

// publish records an allocation event of type typ with a snapshot of the
// allocation (without its Job, as Nomad's event payloads), after any
// bundled client update of it.
func (b *eventBroker) publish(a *Agent, as *allocState, typ string) {
	if b.dirty[as] {
		delete(b.dirty, as)
		b.publish(a, as, evAllocUpdated)
	}
	al := *as.alloc
	al.Job = nil
	raw, err := json.Marshal(&al)
	if err != nil {
		return
	}
	b.append(streamEvent{Topic: "Allocation", Type: typ, Key: al.ID,
		Namespace: al.Namespace, FilterKeys: []string{al.JobID}, Index: a.index,
		Payload: map[string]json.RawMessage{"Allocation": raw}})
}

// clientUpdate bundles a client update of the allocation into the next
// flush.
func (b *eventBroker) clientUpdate(a *Agent, as *allocState) {
	b.dirty[as] = true
	if b.flush != nil || a.closed {
		return
	}
	b.flush = time.AfterFunc(clientSyncInterval, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		b.flush = nil
		if len(b.dirty) == 0 {
			return
		}
		a.bumpLocked()
		for as := range b.dirty {
			b.publish(a, as, evAllocUpdated) // clears the mark
		}
	})
}

// publishEval records an Evaluation event with a snapshot of ev.
func (b *eventBroker) publishEval(ev *api.Evaluation) {
	raw, err := json.Marshal(ev)
	if err != nil {
		return
	}
	b.append(streamEvent{Topic: "Evaluation", Type: evEvalUpdated, Key: ev.ID, Namespace: ev.Namespace,
		FilterKeys: []string{ev.JobID}, Index: ev.ModifyIndex, Payload: map[string]json.RawMessage{"Evaluation": raw}})
}

func (b *eventBroker) append(e streamEvent) {
	b.log = append(b.log, e)
	if len(b.log) > eventBufferSize {
		b.log = append([]streamEvent(nil), b.log[len(b.log)-eventBufferSize:]...)
	}
}

type topicFilter map[string][]string

func (f topicFilter) match(e *streamEvent, ns string) bool {
	if ns != "*" && e.Namespace != ns {
		return false
	}
	keys, ok := f[e.Topic]
	if !ok {
		keys, ok = f["*"]
	}
	if !ok {
		return false
	}
	for _, k := range keys {
		if k == "*" || k == e.Key {
			return true
		}
		for _, fk := range e.FilterKeys {
			if fk == k {
				return true
			}
		}
	}
	return false
}

// eventStream serves GET /v1/event/stream as newline-delimited JSON
// ({"Index":N,"Events":[...]} per batch, "{}" as a heartbeat every 10s).
// The Allocation and Evaluation topics are produced.
func (a *Agent) eventStream(rc *reqCtx) error {
	q := rc.r.URL.Query()
	filter := topicFilter{}
	for _, t := range q["topic"] {
		topic, key, ok := strings.Cut(t, ":")
		if !ok {
			key = "*"
		}
		filter[topic] = append(filter[topic], key)
	}
	if len(filter) == 0 {
		filter["*"] = []string{"*"}
	}
	var from uint64
	if s := q.Get("index"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return errorf(400, "Invalid index")
		}
		from = v
	}
	w := rc.w
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(200)
	if fl != nil {
		fl.Flush()
	}
	hb := time.NewTicker(10 * time.Second)
	defer hb.Stop()
	last := from
	if from > 0 {
		last = from - 1
	}
	for {
		a.mu.Lock()
		var batch []streamEvent
		var idx uint64
		for i := range a.events.log {
			e := &a.events.log[i]
			if e.Index > last && filter.match(e, rc.ns) {
				batch = append(batch, *e)
			}
			if e.Index > idx {
				idx = e.Index
			}
		}
		if idx > last {
			last = idx
		}
		ch := a.notify
		a.mu.Unlock()
		if len(batch) > 0 {
			b, err := json.Marshal(map[string]any{"Index": last, "Events": batch})
			if err != nil {
				return nil
			}
			if _, err := w.Write(append(b, '\n')); err != nil {
				return nil
			}
			if fl != nil {
				fl.Flush()
			}
		}
		select {
		case <-ch:
		case <-hb.C:
			if _, err := w.Write([]byte("{}\n")); err != nil {
				return nil
			}
			if fl != nil {
				fl.Flush()
			}
		case <-rc.r.Context().Done():
			return nil
		case <-a.ctx.Done():
			return nil
		}
	}
}

var _ = api.AllocClientStatusPending
