package ha

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
)

// DefaultLeaderID is the leader session id of the `none` services (Flink's
// HighAvailabilityServices.DEFAULT_LEADER_ID): there is one leader, always.
var DefaultLeaderID SessionID

// noneServices are the `none` HA services (Flink's StandaloneHaServices /
// EmbeddedHaServices): every contender leads at once with DefaultLeaderID,
// retrieval reports fixed addresses (or those confirmed in this process),
// and the stores live in memory, so nothing survives the process.
type noneServices struct {
	mu         sync.Mutex
	closed     bool
	fixed      map[string]string
	published  map[string]LeaderInformation
	elections  map[string]*noneElection
	retrievers map[string][]*noneRetriever

	graphs  *memJobGraphStore
	results *memJobResultStore
	ckpts   map[string]*memCheckpointStore
	counter map[string]*memCounter
}

// NewNone returns the `none` services; addresses are the fixed leader
// addresses by component (may be nil).
func NewNone(addresses map[string]string) Services {
	return &noneServices{
		fixed:      addresses,
		published:  map[string]LeaderInformation{},
		elections:  map[string]*noneElection{},
		retrievers: map[string][]*noneRetriever{},
		graphs:     &memJobGraphStore{graphs: map[string][]byte{}},
		results:    &memJobResultStore{results: map[string]memResult{}},
		ckpts:      map[string]*memCheckpointStore{},
		counter:    map[string]*memCounter{},
	}
}

func noneFence(session SessionID) error {
	if session != DefaultLeaderID {
		return fmt.Errorf("%w: session %s (the only leader session without HA is %s)", ErrNotLeader, session, DefaultLeaderID)
	}
	return nil
}

func (s *noneServices) LeaderElection(component string, contender LeaderContender) (LeaderElection, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if _, dup := s.elections[component]; dup {
		return nil, fmt.Errorf("%w: a contender for %q is already registered", ErrInvalid, component)
	}
	e := &noneElection{s: s, component: component, contender: contender, events: newSerial()}
	s.elections[component] = e
	e.events.post(func() { contender.GrantLeadership(DefaultLeaderID) })
	return e, nil
}

func (s *noneServices) LeaderRetriever(component string, listener LeaderRetrievalListener) (LeaderRetriever, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	r := &noneRetriever{s: s, component: component, listener: listener, events: newSerial()}
	s.retrievers[component] = append(s.retrievers[component], r)
	info := s.currentLocked(component)
	r.events.post(func() { listener.NotifyLeaderAddress(info) })
	return r, nil
}

func (s *noneServices) currentLocked(component string) LeaderInformation {
	if a, ok := s.fixed[component]; ok && a != "" {
		return LeaderInformation{SessionID: DefaultLeaderID, Address: a}
	}
	return s.published[component]
}

// publishLocked records component's leader and tells its retrievers.
func (s *noneServices) publishLocked(component string, info LeaderInformation) {
	if _, fixed := s.fixed[component]; fixed || s.published[component] == info {
		return
	}
	if info.IsEmpty() {
		delete(s.published, component)
	} else {
		s.published[component] = info
	}
	for _, r := range s.retrievers[component] {
		r.events.post(func() { r.listener.NotifyLeaderAddress(info) })
	}
}

func (s *noneServices) JobGraphStore() JobGraphStore   { return s.graphs }
func (s *noneServices) JobResultStore() JobResultStore { return s.results }
func (s *noneServices) BlobStore() BlobStore           { return voidBlobStore{} }

func (s *noneServices) CompletedCheckpointStore(_ context.Context, jobID string, maxRetained int) (CompletedCheckpointStore, error) {
	if maxRetained < 1 {
		return nil, fmt.Errorf("%w: maxRetained %d (want >= 1)", ErrInvalid, maxRetained)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// One store per job for the process's lifetime, as a recovered store
	// would be: a JobMaster that restarts the job sees the checkpoints.
	c, ok := s.ckpts[jobID]
	if !ok {
		c = &memCheckpointStore{}
		s.ckpts[jobID] = c
	}
	c.mu.Lock()
	c.max = maxRetained
	c.mu.Unlock()
	return c, nil
}

func (s *noneServices) CheckpointIDCounter(jobID string) CheckpointIDCounter {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.counter[jobID]
	if !ok {
		c = &memCounter{next: 1}
		s.counter[jobID] = c
	}
	return c
}

func (s *noneServices) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	es := make([]*noneElection, 0, len(s.elections))
	for _, e := range s.elections {
		es = append(es, e)
	}
	var rs []*noneRetriever
	for _, l := range s.retrievers {
		rs = append(rs, l...)
	}
	s.mu.Unlock()
	for _, e := range es {
		_ = e.Close()
	}
	for _, r := range rs {
		_ = r.Close()
	}
	return nil
}

type noneElection struct {
	s         *noneServices
	component string
	contender LeaderContender
	events    *serial
	once      sync.Once
}

func (e *noneElection) ConfirmLeadership(_ context.Context, session SessionID, address string) error {
	if err := noneFence(session); err != nil {
		return err
	}
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	if e.s.elections[e.component] != e {
		return fmt.Errorf("%w: the contender for %q was closed", ErrNotLeader, e.component)
	}
	e.s.publishLocked(e.component, LeaderInformation{SessionID: session, Address: address})
	return nil
}

func (e *noneElection) HasLeadership(session SessionID) bool {
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	return session == DefaultLeaderID && e.s.elections[e.component] == e
}

func (e *noneElection) Close() error {
	e.once.Do(func() {
		e.s.mu.Lock()
		delete(e.s.elections, e.component)
		e.s.publishLocked(e.component, LeaderInformation{})
		e.s.mu.Unlock()
		e.events.post(e.contender.RevokeLeadership)
		e.events.close()
	})
	return nil
}

type noneRetriever struct {
	s         *noneServices
	component string
	listener  LeaderRetrievalListener
	events    *serial
	once      sync.Once
}

func (r *noneRetriever) Close() error {
	r.once.Do(func() {
		r.s.mu.Lock()
		r.s.retrievers[r.component] = slices.DeleteFunc(r.s.retrievers[r.component], func(x *noneRetriever) bool { return x == r })
		r.s.mu.Unlock()
		r.events.close()
	})
	return nil
}

// In-memory stores of the `none` services.

type memJobGraphStore struct {
	mu     sync.Mutex
	graphs map[string][]byte
}

func (m *memJobGraphStore) PutJobGraph(_ context.Context, session SessionID, jobID string, graph []byte) error {
	if err := noneFence(session); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.graphs[jobID] = slices.Clone(graph)
	return nil
}

func (m *memJobGraphStore) RecoverJobGraph(_ context.Context, jobID string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.graphs[jobID]
	if !ok {
		return nil, fmt.Errorf("%w: job graph of %s", ErrNotFound, jobID)
	}
	return slices.Clone(g), nil
}

func (m *memJobGraphStore) RemoveJobGraph(_ context.Context, session SessionID, jobID string) error {
	if err := noneFence(session); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.graphs, jobID)
	return nil
}

func (m *memJobGraphStore) JobIDs(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]string, 0, len(m.graphs))
	for id := range m.graphs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, nil
}

type memResult struct {
	r     JobResult
	clean bool
}

type memJobResultStore struct {
	mu      sync.Mutex
	results map[string]memResult
}

func (m *memJobResultStore) CreateDirtyResult(_ context.Context, session SessionID, r JobResult) error {
	if err := noneFence(session); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.results[r.JobID]; ok {
		return fmt.Errorf("%w: job %s already has a result entry", ErrExists, r.JobID)
	}
	r.Result = slices.Clone(r.Result)
	m.results[r.JobID] = memResult{r: r}
	return nil
}

func (m *memJobResultStore) MarkResultAsClean(_ context.Context, session SessionID, jobID string) error {
	if err := noneFence(session); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.results[jobID]
	if !ok {
		return fmt.Errorf("%w: no result entry for job %s", ErrNotFound, jobID)
	}
	e.clean = true
	m.results[jobID] = e
	return nil
}

func (m *memJobResultStore) HasJobResultEntry(_ context.Context, jobID string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.results[jobID]
	return ok, nil
}

func (m *memJobResultStore) HasCleanJobResultEntry(_ context.Context, jobID string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.results[jobID].clean, nil
}

func (m *memJobResultStore) GetJobResult(_ context.Context, jobID string) (JobResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.results[jobID]
	if !ok {
		return JobResult{}, fmt.Errorf("%w: no result entry for job %s", ErrNotFound, jobID)
	}
	return e.r, nil
}

func (m *memJobResultStore) DirtyResults(context.Context) ([]JobResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []JobResult
	for _, e := range m.results {
		if !e.clean {
			out = append(out, e.r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].JobID < out[j].JobID })
	return out, nil
}

type memCheckpointStore struct {
	mu  sync.Mutex
	max int
	cps []CompletedCheckpoint
}

func (m *memCheckpointStore) AddCheckpoint(_ context.Context, session SessionID, cp CompletedCheckpoint) ([]CompletedCheckpoint, error) {
	if err := noneFence(session); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := checkNewer(m.cps, cp); err != nil {
		return nil, err
	}
	var subsumed []CompletedCheckpoint
	m.cps, subsumed = retain(append(m.cps, cp), m.max)
	return subsumed, nil
}

func (m *memCheckpointStore) Latest() (CompletedCheckpoint, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.cps) == 0 {
		return CompletedCheckpoint{}, false
	}
	return m.cps[len(m.cps)-1], true
}

func (m *memCheckpointStore) All() []CompletedCheckpoint {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.cps)
}

func (m *memCheckpointStore) Clear(_ context.Context, session SessionID) ([]CompletedCheckpoint, error) {
	if err := noneFence(session); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.cps
	m.cps = nil
	return out, nil
}

// checkNewer rejects a checkpoint whose id does not exceed the stored ones.
func checkNewer(cps []CompletedCheckpoint, cp CompletedCheckpoint) error {
	if n := len(cps); n > 0 && cp.ID <= cps[n-1].ID {
		return fmt.Errorf("%w: checkpoint %d is not newer than the latest stored one (%d)", ErrInvalid, cp.ID, cps[n-1].ID)
	}
	return nil
}

// retain splits cps (oldest first) into the newest max and the rest.
func retain(cps []CompletedCheckpoint, max int) (kept, subsumed []CompletedCheckpoint) {
	if len(cps) <= max {
		return cps, nil
	}
	cut := len(cps) - max
	return slices.Clone(cps[cut:]), slices.Clone(cps[:cut])
}

type memCounter struct {
	mu   sync.Mutex
	next int64
}

func (m *memCounter) GetAndIncrement(_ context.Context, session SessionID) (int64, error) {
	if err := noneFence(session); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next++
	return m.next - 1, nil
}

func (m *memCounter) Get(context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.next, nil
}

func (m *memCounter) SetCount(_ context.Context, session SessionID, next int64) error {
	if err := noneFence(session); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next = next
	return nil
}

func (m *memCounter) Remove(_ context.Context, session SessionID) error {
	if err := noneFence(session); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next = 1
	return nil
}

// voidBlobStore is Flink's VoidBlobStore: without HA, blobs live only in
// the JobManager's blob server.
type voidBlobStore struct{}

func (voidBlobStore) Put(context.Context, string, io.Reader) error { return nil }
func (voidBlobStore) Get(_ context.Context, key string) (io.ReadCloser, error) {
	return nil, fmt.Errorf("%w: blob %q (no HA blob store without high availability)", ErrNotFound, key)
}
func (voidBlobStore) Delete(context.Context, string) error { return nil }

// validKey rejects blob keys and job ids that would escape their directory.
func validKey(what, key string) error {
	if key == "" || key == "." || key == ".." || strings.ContainsAny(key, "/\\") {
		return fmt.Errorf("%w: %s %q", ErrInvalid, what, key)
	}
	return nil
}
