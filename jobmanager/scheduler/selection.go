package scheduler

import (
	"cmp"
	"slices"

	"github.com/gofl/gofl/jobgraph"
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
)

// maxPreferredInputs caps how many producers of one input are turned into
// location preferences; wider inputs say nothing useful about locality
// (Flink uses the same bound of 8).
const maxPreferredInputs = 8

// slotProfile is what a slot request prefers.
type slotProfile struct {
	// preferred weighs TaskManagers by how many inputs they host.
	preferred map[string]int
	// previous are the slots the executions ran in before (local recovery).
	previous []eg.AllocationID
	// hosts are the hosts the request's data lives on (a source's HDFS
	// blocks), most preferred first: a slot of a TaskManager on one of
	// them is taken when no TaskManager hosts its inputs.
	hosts []string
}

// SetPreferredHosts tells the scheduler on which hosts job vertex v's
// input data lives (a source's HDFS block replicas, Flink's input split
// locations), weighted by the bytes each holds. Subtask i prefers the
// host ranked i mod n first, then the others by rank, so that readers
// spread over the data's hosts; any slot does when none has a free one.
// Call it before Start, on the scheduler's goroutine; an unknown vertex
// or no hosts is ignored.
func (s *Scheduler) SetPreferredHosts(v jobgraph.VertexID, hosts map[string]int64) {
	jv := s.g.JobVertex(v)
	if jv == nil || len(hosts) == 0 {
		return
	}
	if s.hosts == nil {
		s.hosts = map[int32][]string{}
	}
	s.hosts[int32(jv.Index)] = rankHosts(hosts)
}

// rankHosts orders hosts by weight, heaviest first (ties by name).
func rankHosts(weights map[string]int64) []string {
	out := make([]string, 0, len(weights))
	for h := range weights {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b string) int {
		return cmp.Or(cmp.Compare(weights[b], weights[a]), cmp.Compare(a, b))
	})
	return out
}

// subtaskHosts is subtask's order of ranked: from the host ranked subtask
// mod n on, wrapping around.
func subtaskHosts(ranked []string, subtask int) []string {
	k := subtask % len(ranked)
	return append(slices.Clone(ranked[k:]), ranked[:k]...)
}

// addVertex folds v's preferences into the profile: the locations of its
// producers, and its previous slot.
func (p *slotProfile) addVertex(s *Scheduler, v eg.VertexIndex) {
	ev := &s.g.Vertices[v]
	if ev.LastAllocation != "" {
		p.previous = append(p.previous, ev.LastAllocation)
	}
	if ranked := s.hosts[ev.JobVertex]; len(ranked) > 0 {
		p.hosts = append(p.hosts, subtaskHosts(ranked, int(ev.Subtask))...)
	}
	for _, gi := range ev.Inputs {
		grp := &s.g.Groups[gi]
		if grp.NumPartitions > maxPreferredInputs {
			continue
		}
		first, end := grp.Partitions()
		for part := first; part < end; part++ {
			if loc := s.g.Vertices[s.g.ProducerOf(part)].Current.Location.ID; loc != "" {
				if p.preferred == nil {
					p.preferred = map[string]int{}
				}
				p.preferred[loc]++
			}
		}
	}
}

// slotSelection picks one of the pool's free slots for a request. Called
// only from the scheduler's goroutine; it never blocks and must return a
// free slot whenever the pool has one.
type slotSelection interface {
	selectSlot(p *slotPool, prof *slotProfile) *poolSlot
}

func newSlotSelection(cfg Config) slotSelection {
	var base slotSelection = localityPreferring{}
	if cfg.EvenlySpreadOut {
		base = evenlySpreadOut{}
	}
	if cfg.LocalRecovery {
		return previousAllocation{fallback: base}
	}
	return base
}

// localityPreferring picks a slot on the TaskManager hosting most of the
// request's inputs, else any free slot.
type localityPreferring struct{}

func (localityPreferring) selectSlot(p *slotPool, prof *slotProfile) *poolSlot {
	if tm := bestPreferred(p, prof, false); tm != nil {
		return tm.free[len(tm.free)-1]
	}
	if tm := onPreferredHost(p, prof, false); tm != nil {
		return tm.free[len(tm.free)-1]
	}
	tm := p.withFree[len(p.withFree)-1]
	return tm.free[len(tm.free)-1]
}

// evenlySpreadOut picks, after locality, the TaskManager with the lowest
// share of its slots in use (cluster.evenly-spread-out-slots).
type evenlySpreadOut struct{}

func (evenlySpreadOut) selectSlot(p *slotPool, prof *slotProfile) *poolSlot {
	if tm := bestPreferred(p, prof, true); tm != nil {
		return tm.free[len(tm.free)-1]
	}
	if tm := onPreferredHost(p, prof, true); tm != nil {
		return tm.free[len(tm.free)-1]
	}
	var best *tmSlots
	for _, tm := range p.withFree {
		if best == nil || lessUtilized(tm, best) {
			best = tm
		}
	}
	return best.free[len(best.free)-1]
}

// previousAllocation returns an execution's previous slot when it is free,
// so local state can be reused, and otherwise defers to fallback.
type previousAllocation struct{ fallback slotSelection }

func (s previousAllocation) selectSlot(p *slotPool, prof *slotProfile) *poolSlot {
	for _, id := range prof.previous {
		if slot := p.slots[id]; slot != nil && slot.owner == nil && !slot.lost {
			return slot
		}
	}
	return s.fallback.selectSlot(p, prof)
}

func utilization(tm *tmSlots) float64 {
	return float64(len(tm.slots)-len(tm.free)) / float64(len(tm.slots))
}

func lessUtilized(a, b *tmSlots) bool {
	ua, ub := utilization(a), utilization(b)
	return ua < ub || (ua == ub && a.order < b.order)
}

// bestPreferred is the preferred TaskManager with a free slot and the most
// inputs; ties go to the less utilized one (if evenly) or the older one.
func bestPreferred(p *slotPool, prof *slotProfile, evenly bool) *tmSlots {
	var best *tmSlots
	bestWeight := 0
	for id, w := range prof.preferred {
		tm := p.tms[id]
		if tm == nil || len(tm.free) == 0 {
			continue
		}
		switch {
		case best == nil || w > bestWeight:
		case w < bestWeight:
			continue
		case evenly && !lessUtilized(tm, best):
			continue
		case !evenly && tm.order > best.order:
			continue
		}
		best, bestWeight = tm, w
	}
	return best
}

// onPreferredHost is a TaskManager with a free slot on the first of the
// profile's hosts that has one (Flink's LocationPreferenceSlotSelection
// Strategy by host); among several there, the less utilized (if evenly)
// or the older one.
func onPreferredHost(p *slotPool, prof *slotProfile, evenly bool) *tmSlots {
	for _, h := range prof.hosts {
		var best *tmSlots
		for _, tm := range p.withFree {
			if tm.loc.Host != h {
				continue
			}
			if best == nil || (evenly && lessUtilized(tm, best)) || (!evenly && tm.order < best.order) {
				best = tm
			}
		}
		if best != nil {
			return best
		}
	}
	return nil
}
