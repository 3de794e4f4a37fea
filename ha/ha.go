package ha

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"
)

// Sentinel errors. Errors returned by this package wrap one of them (or a
// storage error) and name the quorum, path or job involved.
var (
	// ErrNotLeader: the write carried a leader session that is not (or no
	// longer) the current leadership of this process; nothing was written.
	ErrNotLeader = errors.New("ha: not leader")
	// ErrNotFound: no such job graph, job result, blob or counter.
	ErrNotFound = errors.New("ha: not found")
	// ErrUnavailable: ZooKeeper could not be reached or the session is
	// lost (the write may or may not have happened; retry as leader).
	ErrUnavailable = errors.New("ha: zookeeper unavailable")
	// ErrClosed: the services were closed.
	ErrClosed = errors.New("ha: closed")
	// ErrExists: the job already has a result entry.
	ErrExists = errors.New("ha: already exists")
	// ErrInvalid: a bad configuration value or argument.
	ErrInvalid = errors.New("ha: invalid")
)

// Components that take part in leader election and retrieval. A JobMaster's
// component is JobMasterComponent(jobID).
const (
	DispatcherComponent      = "dispatcher"
	ResourceManagerComponent = "resourcemanager"
	RestServerComponent      = "rest_server"
)

// JobMasterComponent is the leader election/retrieval component of one
// job's JobMaster.
func JobMasterComponent(jobID string) string { return "job-" + jobID }

// SessionID is a leader session id: a random UUID generated for every grant
// of leadership. It is the fencing token that every RPC to a leader
// carries; the zero value is Flink's DEFAULT_LEADER_ID, the token of the
// `none` services.
type SessionID [16]byte

// NewSessionID returns a random (version 4) UUID.
func NewSessionID() SessionID {
	var s SessionID
	_, _ = rand.Read(s[:])
	s[6] = s[6]&0x0f | 0x40
	s[8] = s[8]&0x3f | 0x80
	return s
}

// ParseSessionID parses the canonical 36-character UUID form.
func ParseSessionID(s string) (SessionID, error) {
	var id SessionID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, fmt.Errorf("%w: %q is not a leader session id (UUID)", ErrInvalid, s)
	}
	h := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	if _, err := hex.Decode(id[:], []byte(h)); err != nil {
		return SessionID{}, fmt.Errorf("%w: %q is not a leader session id (UUID)", ErrInvalid, s)
	}
	return id, nil
}

// String returns the canonical UUID form.
func (s SessionID) String() string {
	h := hex.EncodeToString(s[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// LeaderInformation is what a leader publishes and retrievers report: its
// address and session id. The zero value means "no leader".
type LeaderInformation struct {
	SessionID SessionID `json:"sessionId"`
	Address   string    `json:"address"`
}

// IsEmpty reports whether l means "no leader".
func (l LeaderInformation) IsEmpty() bool { return l.Address == "" }

// LeaderContender is a component that wants to lead (Flink's
// LeaderContender): the Dispatcher, the ResourceManager, a JobMaster.
// Every call comes from the election's one event goroutine, in order, and
// must return promptly (hand long work to the contender's own goroutine).
// Grants and revocations alternate, starting with a grant.
type LeaderContender interface {
	// GrantLeadership makes the contender the leader for session. The
	// contender starts leading and then publishes its address with
	// LeaderElection.ConfirmLeadership(session, address).
	GrantLeadership(session SessionID)
	// RevokeLeadership ends the last granted session: the contender stops
	// acting as leader at once. Its writes with that session already fail
	// with ErrNotLeader.
	RevokeLeadership()
	// HandleError reports an error the election cannot recover from (e.g.
	// ZooKeeper denied access); the contender should fail its process.
	HandleError(err error)
}

// LeaderElection is one contender's part in the election of its process
// (Flink's LeaderElection).
type LeaderElection interface {
	// ConfirmLeadership publishes address as the leader of this component
	// if session is still the current leadership; otherwise it returns
	// ErrNotLeader. It blocks on ZooKeeper (at most the connection
	// timeout) and is idempotent. Called by the contender after a grant,
	// from any goroutine.
	ConfirmLeadership(ctx context.Context, session SessionID, address string) error
	// HasLeadership reports whether session is the current leadership, as
	// far as this process knows. It does not block. Called by the
	// contender to check a fencing token on incoming calls.
	HasLeadership(session SessionID) bool
	// Close withdraws the contender: if it leads, it is revoked and its
	// published address removed. It blocks until done; idempotent. Called
	// by the contender's owner when the component stops.
	Close() error
}

// LeaderRetrievalListener receives leader changes of one component (Flink's
// LeaderRetrievalListener). Calls come from the retriever's one goroutine,
// in order, and must return promptly.
type LeaderRetrievalListener interface {
	// NotifyLeaderAddress reports the current leader; an empty info means
	// that there is none (e.g. the leader died, or this process lost its
	// ZooKeeper connection and cannot tell).
	NotifyLeaderAddress(info LeaderInformation)
	// HandleError reports an error the retriever cannot recover from.
	HandleError(err error)
}

// LeaderRetriever follows the leader of one component (Flink's
// LeaderRetrievalService). The listener is first told the current leader,
// then every change the retriever observes.
type LeaderRetriever interface {
	// Close stops the retriever; no listener call starts after it returns.
	// Blocks until the retriever's goroutine ended; idempotent.
	Close() error
}

// JobGraphStore keeps the job graphs a Dispatcher has accepted, so that a
// new leader recovers them (Flink's JobGraphStore). Graphs are opaque bytes
// (the rpc/pb JobGraph) so that ha does not depend on jobmanager. Methods
// block on ZooKeeper and storageDir and are safe for concurrent use; the
// writes are fenced by the leader session.
type JobGraphStore interface {
	// PutJobGraph adds or replaces the graph of jobID. Called by the
	// Dispatcher when it accepts a job, before it acknowledges the
	// submission. Idempotent.
	PutJobGraph(ctx context.Context, session SessionID, jobID string, graph []byte) error
	// RecoverJobGraph returns the graph of jobID, ErrNotFound if none.
	// Called by a new leader for every id that JobIDs returns.
	RecoverJobGraph(ctx context.Context, jobID string) ([]byte, error)
	// RemoveJobGraph removes jobID's graph (ErrNotFound is not an error:
	// idempotent). Called by the Dispatcher once the job's result is in the
	// JobResultStore.
	RemoveJobGraph(ctx context.Context, session SessionID, jobID string) error
	// JobIDs lists the jobs with a stored graph, sorted.
	JobIDs(ctx context.Context) ([]string, error)
}

// CompletedCheckpoint is a pointer to one completed checkpoint: its id and
// the location (directory URI) of its _metadata, which
// jobmanager/checkpoint wrote under state.checkpoints.dir.
type CompletedCheckpoint struct {
	ID        int64     `json:"id"`
	Location  string    `json:"location"`
	Timestamp time.Time `json:"timestamp"`
}

// CompletedCheckpointStore keeps the latest completed checkpoints of one
// job, oldest first (Flink's CompletedCheckpointStore). It is built by the
// job's JobMaster when it gains leadership and loads what is stored then
// (recovery). Methods are safe for concurrent use.
type CompletedCheckpointStore interface {
	// AddCheckpoint adds cp (its id must exceed every stored id) and drops
	// the oldest ones beyond the retained number; it returns the dropped
	// ones, whose files the caller deletes. Blocks on ZooKeeper; fenced.
	// Called by the CheckpointCoordinator when a checkpoint completes,
	// after its _metadata is durable.
	AddCheckpoint(ctx context.Context, session SessionID, cp CompletedCheckpoint) (subsumed []CompletedCheckpoint, err error)
	// Latest returns the newest checkpoint; false if there is none. Does
	// not block. Called to restore the job.
	Latest() (CompletedCheckpoint, bool)
	// All returns the retained checkpoints, oldest first. Does not block.
	All() []CompletedCheckpoint
	// Clear removes every pointer and returns them; the caller deletes the
	// files it wants gone. Blocks; fenced; idempotent. Called when the job
	// reached a globally terminal state.
	Clear(ctx context.Context, session SessionID) ([]CompletedCheckpoint, error)
}

// CheckpointIDCounter hands out checkpoint ids of one job (Flink's
// CheckpointIDCounter); ids survive leader changes. The first id is 1.
type CheckpointIDCounter interface {
	// GetAndIncrement returns the next id and advances the counter, with a
	// versioned compare-and-set (retried on a concurrent update). Blocks;
	// fenced. Called by the CheckpointCoordinator for each checkpoint.
	GetAndIncrement(ctx context.Context, session SessionID) (int64, error)
	// Get returns the next id without advancing. Blocks.
	Get(ctx context.Context) (int64, error)
	// SetCount sets the next id (e.g. after restoring a savepoint with a
	// higher id). Blocks; fenced.
	SetCount(ctx context.Context, session SessionID, next int64) error
	// Remove deletes the counter; idempotent. Called when the job reached a
	// globally terminal state.
	Remove(ctx context.Context, session SessionID) error
}

// JobResult is the entry of a job that reached a globally terminal state.
// Result is opaque to ha (the JobManager's serialized job result).
type JobResult struct {
	JobID  string `json:"jobId"`
	State  string `json:"state"`
	Result []byte `json:"result,omitempty"`
}

// JobResultStore records the jobs that reached a globally terminal state
// (Flink's JobResultStore), first as dirty (cleanup pending), then clean. A
// job with an entry is never run again, whoever leads (FLINK-39704).
// Methods block on storageDir and are safe for concurrent use.
type JobResultStore interface {
	// CreateDirtyResult records r as dirty; ErrExists if an
	// entry for the job exists. Fenced. Called by the Dispatcher when a
	// job reaches a globally terminal state, before its cleanup.
	CreateDirtyResult(ctx context.Context, session SessionID, r JobResult) error
	// MarkResultAsClean turns the dirty entry into a clean one; a clean
	// entry is left alone (idempotent); no entry: ErrNotFound. Fenced.
	// Called by the Dispatcher when the job's cleanup is done.
	MarkResultAsClean(ctx context.Context, session SessionID, jobID string) error
	// HasJobResultEntry reports whether jobID has a dirty or clean entry.
	// Called by a new leader before it recovers a job graph.
	HasJobResultEntry(ctx context.Context, jobID string) (bool, error)
	// HasCleanJobResultEntry reports whether jobID has a clean entry.
	HasCleanJobResultEntry(ctx context.Context, jobID string) (bool, error)
	// GetJobResult returns jobID's entry, dirty or clean; ErrNotFound if
	// it has none. Called by an application cluster whose restarted driver
	// submits a job that ended under a former JobManager.
	GetJobResult(ctx context.Context, jobID string) (JobResult, error)
	// DirtyResults lists the dirty entries, whose cleanup a new leader
	// finishes.
	DirtyResults(ctx context.Context) ([]JobResult, error)
}

// BlobStore keeps job binaries and other blobs that a new leader needs
// (Flink's BlobStore). Keys are content addresses or other names free of
// "/"; writes are idempotent and not fenced (a deposed leader can only
// write the same bytes). Methods block and are safe for concurrent use.
type BlobStore interface {
	// Put stores the bytes of r under key, replacing any (atomically).
	Put(ctx context.Context, key string, r io.Reader) error
	// Get opens key; ErrNotFound if absent. The caller closes it.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// Delete removes key; absent is not an error.
	Delete(ctx context.Context, key string) error
}

// Services are the HA services of one process (Flink's
// HighAvailabilityServices): one ZooKeeper session (or none) shared by
// every component. Built once per process with New; safe for concurrent
// use.
type Services interface {
	// LeaderElection registers contender for component (one contender per
	// component and process) and returns its election handle. The
	// contender is granted leadership when this process leads (at once for
	// `none`). Does not block on ZooKeeper. Called by the JobManager's
	// Dispatcher, ResourceManager and JobMasters.
	LeaderElection(component string, contender LeaderContender) (LeaderElection, error)
	// LeaderRetriever starts following component's leader and reports it
	// to listener. Does not block. Called by TaskManagers, runners, the CLI
	// and REST clients, and the JobManager's own components.
	LeaderRetriever(component string, listener LeaderRetrievalListener) (LeaderRetriever, error)
	// JobGraphStore returns the job graph store. Not blocking; cheap.
	JobGraphStore() JobGraphStore
	// JobResultStore returns the job result store. Not blocking; cheap.
	JobResultStore() JobResultStore
	// BlobStore returns the blob store. Not blocking; cheap.
	BlobStore() BlobStore
	// CompletedCheckpointStore loads and returns the checkpoint store of
	// jobID, retaining maxRetained (>= 1) checkpoints. Blocks (recovery).
	// Called by a JobMaster when it gains leadership.
	CompletedCheckpointStore(ctx context.Context, jobID string, maxRetained int) (CompletedCheckpointStore, error)
	// CheckpointIDCounter returns jobID's counter. Not blocking.
	CheckpointIDCounter(jobID string) CheckpointIDCounter
	// Close withdraws every contender (revoking them), stops retrievers,
	// and ends the ZooKeeper session, so this process's latch nodes vanish
	// at once. Blocks until every goroutine ended; idempotent.
	Close() error
}
