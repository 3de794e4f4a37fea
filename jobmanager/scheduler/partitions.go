package scheduler

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/gofl/gofl/jobgraph"
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/jobmanager/failover"
)

// partitionTracker tracks the BLOCKING partitions held by TaskManagers and
// releases them once every consumer region has finished (Flink's
// JobMasterPartitionTracker with the region partition group release
// strategy), when their producer restarts, and when the job ends.
// PIPELINED partitions are released by the TaskManagers themselves once
// consumed.
type partitionTracker struct {
	s *Scheduler
	// holder is the TaskManager holding each tracked partition, or "".
	holder []string
	// releases collects release requests per TaskManager until Ready.
	releases map[string][]eg.ResultPartitionID
}

func newPartitionTracker(s *Scheduler) *partitionTracker {
	return &partitionTracker{s: s, holder: make([]string, len(s.g.Partitions)), releases: map[string][]eg.ResultPartitionID{}}
}

// isAvailable is Flink's availability for region failover
// (RestartPipelinedRegionFailoverStrategy's
// RegionFailoverResultPartitionAvailabilityChecker over the
// ExecutionGraphResultPartitionAvailabilityChecker): a partition is
// available while the partition tracker tracks it, which it does for
// BLOCKING partitions from their producer's deployment on (Flink's
// JobMasterPartitionTracker tracks only partitions the scheduler releases)
// until they are released, lost or reported missing, or their producer
// fails or is cancelled (Flink's Execution stops tracking them then). A
// producer still running counts: a failure elsewhere must not restart
// healthy producers whose output nobody lost. PIPELINED partitions are never
// available, their producers restart with their consumers.
func (t *partitionTracker) isAvailable(p eg.PartitionIndex) bool {
	if t.holder[p] == "" {
		return false
	}
	if t.s.g.Partitions[p].Finished {
		return true // its producer FINISHED (the flag is reset when it restarts)
	}
	switch t.s.g.Vertices[t.s.g.ProducerOf(p)].Current.State {
	case eg.Failed, eg.Canceled, eg.Canceling:
		return false
	}
	return true
}

// startTracking records the BLOCKING partitions of a deployed producer.
func (t *partitionTracker) startTracking(v eg.VertexIndex) {
	g := t.s.g
	var buf [4]eg.PartitionIndex
	for _, p := range g.ProducedPartitions(buf[:0], v) {
		if g.Results[g.Partitions[p].Result].Type == jobgraph.Blocking {
			t.holder[p] = g.Vertices[v].Current.Location.ID
		}
	}
}

// vertexFinished releases the partitions v's region has consumed in full
// once the region finished.
func (t *partitionTracker) vertexFinished(v eg.VertexIndex) {
	g := t.s.g
	reg := &g.Regions[g.Vertices[v].Region]
	if reg.UnfinishedVertices > 0 {
		return
	}
	for _, gi := range reg.ConsumedGroups {
		grp := &g.Groups[gi]
		if grp.UnfinishedConsumerRegions == 0 {
			first, end := grp.Partitions()
			for p := first; p < end; p++ {
				t.release(p)
			}
		}
	}
}

func (t *partitionTracker) release(p eg.PartitionIndex) {
	if tm := t.holder[p]; tm != "" {
		t.holder[p] = ""
		t.releases[tm] = append(t.releases[tm], t.s.g.PartitionID(p))
	}
}

// releaseProducedBy releases v's partitions before v restarts.
func (t *partitionTracker) releaseProducedBy(v eg.VertexIndex) {
	var buf [4]eg.PartitionIndex
	for _, p := range t.s.g.ProducedPartitions(buf[:0], v) {
		t.release(p)
	}
}

func (t *partitionTracker) releaseAll() {
	for p := range t.holder {
		t.release(eg.PartitionIndex(p))
	}
}

// taskManagerLost forgets the partitions of a TaskManager that is gone and
// returns them.
func (t *partitionTracker) taskManagerLost(tm string) []eg.PartitionIndex {
	var lost []eg.PartitionIndex
	for p, h := range t.holder {
		if h == tm {
			t.holder[p] = ""
			lost = append(lost, eg.PartitionIndex(p))
		}
	}
	delete(t.releases, tm)
	return lost
}

// forget stops tracking a partition its TaskManager no longer holds; no
// release is sent.
func (t *partitionTracker) forget(p eg.PartitionIndex) { t.holder[p] = "" }

// heldBy reports whether tm holds the tracked partition p.
func (t *partitionTracker) heldBy(p eg.PartitionIndex, tm string) bool { return t.holder[p] == tm }

// markMissing forgets a partition a consumer could not find, so failover
// restarts its producer.
func (t *partitionTracker) markMissing(cause error) {
	var pnf *failover.PartitionNotFoundError
	if !errors.As(cause, &pnf) {
		return
	}
	if p, ok := t.parse(pnf.ResultPartitionID); ok {
		t.holder[p] = ""
	}
}

// parse reads the "result[partition]@attempt" form of ResultPartitionID.String.
func (t *partitionTracker) parse(s string) (eg.PartitionIndex, bool) {
	at := strings.Index(s, "]@")
	open := strings.LastIndex(s[:max(at, 0)], "[")
	if at < 0 || open < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(s[open+1 : at])
	if err != nil {
		return 0, false
	}
	return t.s.g.LookupPartition(eg.ResultPartitionID{Result: jobgraph.ResultID(s[:open]), Partition: int32(n)})
}

// flush moves collected releases into Ready, ordered by TaskManager.
func (t *partitionTracker) flush() {
	if len(t.releases) == 0 {
		return
	}
	tms := make([]string, 0, len(t.releases))
	for tm := range t.releases {
		tms = append(tms, tm)
	}
	slices.Sort(tms)
	for _, tm := range tms {
		t.s.ready.PartitionReleases = append(t.s.ready.PartitionReleases, PartitionRelease{TaskManagerID: tm, Partitions: t.releases[tm]})
	}
	clear(t.releases)
}
