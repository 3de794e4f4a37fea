package checkpoint

import (
	"slices"
	"strings"

	"github.com/gofl/gofl/rpc/pb"
)

// SharedLocation is the directory of the files a job's incremental
// checkpoints share: <dir>/<job-id>/shared.
func SharedLocation(dir, jobID string) string {
	return strings.TrimRight(dir, "/") + "/" + jobID + "/shared"
}

// SharedStateRegistry is Flink's SharedStateRegistry: it counts the
// references of the retained checkpoints (and, for good, of the checkpoint
// the job restored from) to shared state files, by absolute URI, so a
// subsumed checkpoint deletes only the files no retained checkpoint needs.
// Files that only aborted checkpoints uploaded are orphans: they are
// deleted once a later checkpoint completed without them (an LSM never
// brings a dropped file back, so no later snapshot can need them). Pure
// bookkeeping, owned by the Coordinator.
type SharedStateRegistry struct {
	refs map[string]int
	// orphans: URI -> the newest aborted checkpoint that listed it.
	orphans map[string]int64
	// seen: some checkpoint or the restored one had shared files.
	seen bool
}

func newSharedStateRegistry() *SharedStateRegistry {
	return &SharedStateRegistry{refs: map[string]int{}, orphans: map[string]int64{}}
}

// sharedURIs are the distinct shared files the handles list.
func sharedURIs(hs []*pb.OperatorSubtaskStateHandle) []string {
	var out []string
	for _, h := range hs {
		for _, f := range h.GetSharedFiles() {
			if f.GetPath() != "" {
				out = append(out, f.GetPath())
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func metadataHandles(md *pb.CheckpointMetadata) []*pb.OperatorSubtaskStateHandle {
	var hs []*pb.OperatorSubtaskStateHandle
	for _, op := range md.GetOperators() {
		hs = append(hs, op.GetSubtasks()...)
	}
	return hs
}

// Register adds a reference of a completed (or restored) checkpoint to
// each of its shared files.
func (r *SharedStateRegistry) Register(md *pb.CheckpointMetadata) {
	for _, u := range sharedURIs(metadataHandles(md)) {
		r.refs[u]++
		delete(r.orphans, u)
		r.seen = true
	}
}

// Unregister drops a discarded checkpoint's references and returns the
// files no longer referenced, sorted: the caller deletes them.
func (r *SharedStateRegistry) Unregister(md *pb.CheckpointMetadata) []string {
	var gone []string
	for _, u := range sharedURIs(metadataHandles(md)) {
		if r.refs[u]--; r.refs[u] <= 0 {
			delete(r.refs, u)
			gone = append(gone, u)
		}
	}
	return gone
}

// Orphan notes the shared files of an aborted checkpoint id's handles that
// no retained checkpoint references.
func (r *SharedStateRegistry) Orphan(id int64, hs []*pb.OperatorSubtaskStateHandle) {
	for _, u := range sharedURIs(hs) {
		r.seen = true
		if r.refs[u] == 0 && r.orphans[u] < id {
			r.orphans[u] = id
		}
	}
}

// Sweep returns (and forgets) the orphans of checkpoints before completed,
// sorted: a checkpoint after them completed without them.
func (r *SharedStateRegistry) Sweep(completed int64) []string {
	var out []string
	for u, id := range r.orphans {
		if id < completed {
			out = append(out, u)
			delete(r.orphans, u)
		}
	}
	slices.Sort(out)
	return out
}

// Referenced reports whether a file under dir (a URI prefix) is still
// referenced.
func (r *SharedStateRegistry) Referenced(dir string) bool {
	prefix := strings.TrimRight(dir, "/") + "/"
	for u := range r.refs {
		if strings.HasPrefix(u, prefix) {
			return true
		}
	}
	return false
}

// Refs returns the reference count of uri (for tests and diagnostics).
func (r *SharedStateRegistry) Refs(uri string) int { return r.refs[uri] }
