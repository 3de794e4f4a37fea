package testagent

import (
	"fmt"
	"math/rand/v2"
	"net"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Nomad's desired-status descriptions.
const (
	descNotNeeded = "alloc not needed due to job update"
	descUpdating  = "alloc is being updated due to job update"
)

func (a *Agent) newEvalLocked(ns, jobID, typ string, prio int, trig string, jmi uint64) *api.Evaluation {
	idx := a.bumpLocked("evals")
	now := time.Now().UnixNano()
	ev := &api.Evaluation{
		ID: newUUID(), Namespace: ns, Priority: prio, Type: typ, TriggeredBy: trig, JobID: jobID,
		JobModifyIndex: jmi, Status: api.EvalStatusPending, CreateIndex: idx, ModifyIndex: idx,
		CreateTime: now, ModifyTime: now,
	}
	a.evals[ev.ID] = ev
	a.events.publishEval(ev)
	return ev
}

// finishEvalLocked completes an evaluation. With placement failures it
// records FailedTGAllocs and creates a "blocked" follow-up evaluation that
// is retried when capacity frees up, as Nomad's scheduler does.
func (a *Agent) finishEvalLocked(ev *api.Evaluation, failed map[string]*api.AllocationMetric, queued map[string]int) {
	ev.Status = api.EvalStatusComplete
	ev.QueuedAllocations = queued
	if len(failed) > 0 {
		ev.FailedTGAllocs = failed
		bl := a.newEvalLocked(ev.Namespace, ev.JobID, ev.Type, ev.Priority, "queued-allocs", ev.JobModifyIndex)
		bl.Status = api.EvalStatusBlocked
		bl.StatusDescription = "created to place remaining allocations"
		bl.PreviousEval = ev.ID
		bl.QueuedAllocations = queued
		bl.ClassEligibility = map[string]bool{}
		ev.BlockedEval = bl.ID
	}
	idx := a.bumpLocked("evals")
	ev.ModifyIndex, ev.ModifyTime = idx, time.Now().UnixNano()
	a.events.publishEval(ev)
}

// scheduleLocked runs the scheduler for a job (synchronously: the returned
// evaluation is already complete).
func (a *Agent) scheduleLocked(js *jobState, trig string) *api.Evaluation {
	j := js.job
	// A new evaluation supersedes the job's blocked one.
	for _, ev := range a.evals {
		if ev.JobID == *j.ID && ev.Namespace == *j.Namespace && ev.Status == api.EvalStatusBlocked {
			ev.Status = api.EvalStatusCancelled
			ev.StatusDescription = "evaluation superseded by a newer evaluation"
			ev.ModifyIndex, ev.ModifyTime = a.bumpLocked("evals"), time.Now().UnixNano()
		}
	}
	ev := a.newEvalLocked(*j.Namespace, *j.ID, *j.Type, *j.Priority, trig, *j.JobModifyIndex)
	failed, queued := a.reconcileLocked(js, ev.ID)
	a.finishEvalLocked(ev, failed, queued)
	a.updateJobStatusLocked(js)
	return ev
}

// retryBlockedLocked re-runs placement for blocked evaluations after
// capacity was freed.
func (a *Agent) retryBlockedLocked() {
	if a.retrying {
		return
	}
	a.retrying = true
	defer func() { a.retrying = false }()
	var blocked []*api.Evaluation
	for _, ev := range a.evals {
		if ev.Status == api.EvalStatusBlocked {
			blocked = append(blocked, ev)
		}
	}
	sort.Slice(blocked, func(i, j int) bool { return blocked[i].CreateIndex < blocked[j].CreateIndex })
	for _, ev := range blocked {
		js := a.jobs[jobKey{ev.Namespace, ev.JobID}]
		if js == nil || *js.job.Stop {
			ev.Status = api.EvalStatusCancelled
			ev.ModifyIndex, ev.ModifyTime = a.bumpLocked("evals"), time.Now().UnixNano()
			continue
		}
		failed, queued := a.reconcileLocked(js, ev.ID)
		if len(failed) == 0 {
			ev.Status = api.EvalStatusComplete
			ev.QueuedAllocations = queued
			ev.ModifyIndex, ev.ModifyTime = a.bumpLocked("evals"), time.Now().UnixNano()
			a.updateJobStatusLocked(js)
		}
	}
}

// reconcileLocked makes the job's allocations match its groups' counts:
// it stops surplus and outdated allocations and places missing ones.
func (a *Agent) reconcileLocked(js *jobState, evalID string) (map[string]*api.AllocationMetric, map[string]int) {
	j := js.job
	k := jobKey{*j.Namespace, *j.ID}
	failed := map[string]*api.AllocationMetric{}
	queued := map[string]int{}
	groups := map[string]bool{}
	for _, tg := range j.TaskGroups {
		groups[*tg.Name] = true
	}
	// Allocations of removed groups, outdated specs, or a stopped job.
	for _, as := range a.allocsOfLocked(k) {
		if as.alloc.DesiredStatus != api.AllocDesiredStatusRun {
			continue
		}
		switch {
		case *j.Stop && as.clientTerminal():
			// Finished allocations keep DesiredStatus run (as Nomad's).
		case *j.Stop || !groups[as.alloc.TaskGroup]:
			a.stopAllocLocked(as, descNotNeeded)
		case as.specVersion != js.specVersion:
			a.stopAllocLocked(as, descUpdating)
		}
	}
	if *j.Stop {
		return nil, nil
	}
	for _, tg := range j.TaskGroups {
		name := *tg.Name
		var existing []*allocState
		for _, as := range a.allocsOfLocked(k) {
			if as.alloc.TaskGroup == name && as.alloc.DesiredStatus == api.AllocDesiredStatusRun {
				existing = append(existing, as)
			}
		}
		sort.Slice(existing, func(x, y int) bool { return existing[x].index < existing[y].index })
		want := *tg.Count
		for len(existing) > want {
			a.stopAllocLocked(existing[len(existing)-1], descNotNeeded)
			existing = existing[:len(existing)-1]
		}
		used := map[int]bool{}
		for _, as := range existing {
			used[as.index] = true
		}
		queued[name] = 0
		next := 0
		for n := len(existing); n < want; n++ {
			for used[next] {
				next++
			}
			metric, ok := a.placeLocked(js, tg, evalID, next)
			if !ok {
				if m := failed[name]; m != nil {
					m.CoalescedFailures++
				} else {
					failed[name] = metric
				}
				queued[name]++
				continue
			}
			used[next] = true
		}
	}
	return failed, queued
}

func (a *Agent) allocsOfLocked(k jobKey) []*allocState {
	var out []*allocState
	for _, as := range a.allocs {
		if as.alloc.JobID == k.id && as.alloc.Namespace == k.ns {
			out = append(out, as)
		}
	}
	return out
}

func (a *Agent) baseMetric() *api.AllocationMetric {
	return &api.AllocationMetric{
		NodesInPool: 1, NodePool: "default",
		NodesAvailable:     map[string]int{a.cfg.Datacenter: 1},
		ClassFiltered:      map[string]int{},
		ConstraintFiltered: map[string]int{},
		ClassExhausted:     map[string]int{},
		DimensionExhausted: map[string]int{},
		ResourcesExhausted: map[string]*api.Resources{},
		ScoreMetaData:      []*api.NodeScoreMeta{},
	}
}

// placeLocked checks feasibility and fit of one allocation of tg on the
// node, and creates and starts it when it fits.
func (a *Agent) placeLocked(js *jobState, tg *api.TaskGroup, evalID string, index int) (*api.AllocationMetric, bool) {
	start := time.Now()
	j := js.job
	m := a.baseMetric()
	// Datacenters (globs, as in Nomad 1.5+).
	dcOK := false
	for _, dc := range j.Datacenters {
		if ok, _ := path.Match(dc, a.cfg.Datacenter); ok {
			dcOK = true
		}
	}
	if !dcOK {
		m.NodesAvailable = map[string]int{}
		for _, dc := range j.Datacenters {
			m.NodesAvailable[dc] = 0
		}
		m.NodesInPool = 0
		return m, false
	}
	m.NodesEvaluated = 1
	// Constraints: job, group, tasks.
	cons := append(append([]*api.Constraint{}, j.Constraints...), tg.Constraints...)
	for _, t := range tg.Tasks {
		cons = append(cons, t.Constraints...)
	}
	for _, c := range cons {
		if !a.checkConstraint(c) {
			m.NodesFiltered = 1
			m.ConstraintFiltered[constraintString(c)] = 1
			return m, false
		}
	}
	for _, t := range tg.Tasks {
		if !supportedDrivers[t.Driver] {
			m.NodesFiltered = 1
			m.ConstraintFiltered["missing drivers"] = 1
			return m, false
		}
	}
	// Resources.
	cpu, mem := 0, 0
	for _, t := range tg.Tasks {
		cpu += *t.Resources.CPU
		mem += *t.Resources.MemoryMB
	}
	usedCPU, usedMem := 0, 0
	usedPorts := map[int]bool{}
	for _, as := range a.allocs {
		if as.terminalLocked() {
			continue
		}
		usedCPU += as.cpu
		usedMem += as.mem
		for _, p := range as.ports {
			usedPorts[p.Value] = true
		}
	}
	dim := ""
	switch {
	case usedCPU+cpu > a.cfg.NodeCPU:
		dim = "cpu"
	case usedMem+mem > a.cfg.NodeMemoryMB:
		dim = "memory"
	}
	// Static ports must not collide with ports held by live allocations.
	nets := allNetworks(tg)
	if dim == "" {
		seen := map[int]bool{}
		for _, n := range nets {
			for _, p := range n.net.ReservedPorts {
				if usedPorts[p.Value] || seen[p.Value] {
					dim = fmt.Sprintf("network: reserved port collision %s=%d", p.Label, p.Value)
				}
				seen[p.Value] = true
			}
		}
	}
	if dim != "" {
		m.NodesExhausted = 1
		m.DimensionExhausted[dim] = 1
		m.ClassExhausted = map[string]int{}
		m.AllocationTime = time.Since(start)
		return m, false
	}
	ports, allocNets, taskNets := a.assignPorts(nets, usedPorts)
	m.AllocationTime = time.Since(start)
	m.ScoreMetaData = []*api.NodeScoreMeta{{NodeID: a.nodeID, NormScore: 1, Scores: map[string]float64{"binpack": 0.5}}}
	a.createAllocLocked(js, tg, evalID, index, m, cpu, mem, ports, allocNets, taskNets)
	return m, true
}

type netRef struct {
	task string // "" for group networks
	net  *api.NetworkResource
}

func allNetworks(tg *api.TaskGroup) []netRef {
	var out []netRef
	for _, n := range tg.Networks {
		out = append(out, netRef{"", n})
	}
	for _, t := range tg.Tasks {
		if t.Resources != nil {
			for _, n := range t.Resources.Networks {
				out = append(out, netRef{t.Name, n})
			}
		}
	}
	return out
}

// assignPorts gives each dynamic port a free local port (the agent binds
// 127.0.0.1:0 to find one, like a real client picks from its free range)
// and returns the allocated ports and networks.
func (a *Agent) assignPorts(nets []netRef, used map[int]bool) ([]api.PortMapping, []*api.NetworkResource, map[string][]*api.NetworkResource) {
	var ports []api.PortMapping
	var shared []*api.NetworkResource
	taskNets := map[string][]*api.NetworkResource{}
	for _, nr := range nets {
		n := &api.NetworkResource{Mode: nr.net.Mode, Device: "lo", IP: "127.0.0.1", CIDR: "127.0.0.1/32"}
		if n.Mode == "" {
			n.Mode = "host"
		}
		for _, p := range nr.net.ReservedPorts {
			n.ReservedPorts = append(n.ReservedPorts, api.Port{Label: p.Label, Value: p.Value, To: p.To})
			ports = append(ports, api.PortMapping{Label: p.Label, Value: p.Value, To: p.To, HostIP: "127.0.0.1"})
		}
		for _, p := range nr.net.DynamicPorts {
			v := freePort(used)
			used[v] = true
			to := p.To
			if to == -1 {
				to = v
			}
			n.DynamicPorts = append(n.DynamicPorts, api.Port{Label: p.Label, Value: v, To: to})
			ports = append(ports, api.PortMapping{Label: p.Label, Value: v, To: to, HostIP: "127.0.0.1"})
		}
		if nr.task == "" {
			shared = append(shared, n)
		} else {
			taskNets[nr.task] = append(taskNets[nr.task], n)
		}
	}
	return ports, shared, taskNets
}

func freePort(used map[int]bool) int {
	// Nomad's dynamic range is 20000-32000: random ports in it that are
	// free on the host.
	for i := 0; i < 200; i++ {
		p := 20000 + rand.IntN(12001)
		if used[p] {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		_ = ln.Close()
		return p
	}
	for p := 20000; p < 32000; p++ {
		if !used[p] {
			return p
		}
	}
	return 0
}

func constraintString(c *api.Constraint) string {
	return fmt.Sprintf("%s %s %s", c.LTarget, c.Operand, c.RTarget)
}

// resolveTarget resolves a constraint target: ${attr.*}, ${node.*},
// ${meta.*}; anything else is a literal.
func (a *Agent) resolveTarget(t string) (string, bool) {
	if !strings.HasPrefix(t, "${") || !strings.HasSuffix(t, "}") {
		return t, true
	}
	key := t[2 : len(t)-1]
	n := a.node
	switch {
	case key == "node.unique.id":
		return n.ID, true
	case key == "node.unique.name":
		return n.Name, true
	case key == "node.datacenter":
		return n.Datacenter, true
	case key == "node.class":
		return n.NodeClass, true
	case key == "node.pool":
		return n.NodePool, true
	case key == "node.region":
		return a.cfg.Region, true
	case strings.HasPrefix(key, "attr."):
		v, ok := n.Attributes[strings.TrimPrefix(key, "attr.")]
		return v, ok
	case strings.HasPrefix(key, "meta."):
		v, ok := n.Meta[strings.TrimPrefix(key, "meta.")]
		return v, ok
	}
	return "", false
}

// checkConstraint evaluates one constraint against the node. distinct_hosts
// and distinct_property are satisfied trivially (one node); version/semver
// are not implemented and never match.
func (a *Agent) checkConstraint(c *api.Constraint) bool {
	op := c.Operand
	if op == "" {
		op = "="
	}
	switch op {
	case "distinct_hosts", "distinct_property":
		return true
	}
	l, lok := a.resolveTarget(c.LTarget)
	r, rok := a.resolveTarget(c.RTarget)
	switch op {
	case "=", "==", "is":
		return lok && rok && l == r
	case "!=", "not":
		return !(lok == rok && l == r)
	case "is_set":
		return lok
	case "is_not_set":
		return !lok
	case "regexp":
		if !lok || !rok {
			return false
		}
		re, err := regexp.Compile(r)
		return err == nil && re.MatchString(l)
	case "set_contains", "set_contains_any":
		if !lok || !rok {
			return false
		}
		have := map[string]bool{}
		for _, s := range strings.Split(l, ",") {
			have[strings.TrimSpace(s)] = true
		}
		for _, s := range strings.Split(r, ",") {
			in := have[strings.TrimSpace(s)]
			if op == "set_contains" && !in {
				return false
			}
			if op == "set_contains_any" && in {
				return true
			}
		}
		return op == "set_contains"
	case "<", "<=", ">", ">=":
		if !lok || !rok {
			return false
		}
		lf, e1 := strconv.ParseFloat(l, 64)
		rf, e2 := strconv.ParseFloat(r, 64)
		cmp := strings.Compare(l, r)
		if e1 == nil && e2 == nil {
			switch {
			case lf < rf:
				cmp = -1
			case lf > rf:
				cmp = 1
			default:
				cmp = 0
			}
		}
		switch op {
		case "<":
			return cmp < 0
		case "<=":
			return cmp <= 0
		case ">":
			return cmp > 0
		default:
			return cmp >= 0
		}
	}
	return false
}

// stopAllocLocked sets an allocation's desired status to stop; its runner
// kills the tasks.
func (a *Agent) stopAllocLocked(as *allocState, desc string) {
	if as.alloc.DesiredStatus != api.AllocDesiredStatusRun {
		return
	}
	as.alloc.DesiredStatus = api.AllocDesiredStatusStop
	as.alloc.DesiredDescription = desc
	a.touchAllocLocked(as, evPlanResult)
	as.requestStop()
	a.retryBlockedLocked()
}

// touchAllocLocked records a change of the allocation: a server's (event
// type typ, published at once) or, with typ "", a client update (bundled
// into one AllocationUpdated event per clientSyncInterval, as a Nomad
// client batches its updates).
func (a *Agent) touchAllocLocked(as *allocState, typ string) {
	idx := a.bumpLocked("allocs")
	as.alloc.ModifyIndex, as.alloc.AllocModifyIndex, as.alloc.ModifyTime = idx, idx, time.Now().UnixNano()
	if typ == "" {
		a.events.clientUpdate(a, as)
		return
	}
	a.events.publish(a, as, typ)
}
