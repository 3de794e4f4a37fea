package testagent

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
)

// ---- jobs ----

func (a *Agent) jobsList(rc *reqCtx) error {
	prefix := rc.r.URL.Query().Get("prefix")
	withMeta := rc.r.URL.Query().Get("meta") == "true"
	match := func(k jobKey) bool {
		return (rc.ns == "*" || k.ns == rc.ns) && strings.HasPrefix(k.id, prefix)
	}
	return a.blockingQuery(rc, func() uint64 { return a.tableIndexLocked("jobs") },
		func() (any, uint64, error) {
			out := []*api.JobListStub{}
			for k, js := range a.jobs {
				if match(k) {
					out = append(out, a.jobStubLocked(js, withMeta))
				}
			}
			sort.Slice(out, func(i, j int) bool {
				if out[i].Namespace != out[j].Namespace {
					return out[i].Namespace < out[j].Namespace
				}
				return out[i].ID < out[j].ID
			})
			return out, a.tableIndexLocked("jobs"), nil
		})
}

func (a *Agent) jobStubLocked(js *jobState, withMeta bool) *api.JobListStub {
	j := js.job
	s := &api.JobListStub{
		ID:                *j.ID,
		ParentID:          *j.ParentID,
		Name:              *j.Name,
		Namespace:         *j.Namespace,
		Datacenters:       j.Datacenters,
		Type:              *j.Type,
		Priority:          *j.Priority,
		Periodic:          j.Periodic != nil,
		ParameterizedJob:  j.ParameterizedJob != nil && !j.Dispatched,
		Stop:              *j.Stop,
		Status:            *j.Status,
		StatusDescription: *j.StatusDescription,
		JobSummary:        a.jobSummaryLocked(js),
		CreateIndex:       *j.CreateIndex,
		ModifyIndex:       *j.ModifyIndex,
		JobModifyIndex:    *j.JobModifyIndex,
		SubmitTime:        *j.SubmitTime,
	}
	if withMeta {
		s.Meta = j.Meta
	}
	return s
}

func (a *Agent) jobSummaryLocked(js *jobState) *api.JobSummary {
	j := js.job
	sum := &api.JobSummary{JobID: *j.ID, Namespace: *j.Namespace, Summary: map[string]api.TaskGroupSummary{},
		CreateIndex: *j.CreateIndex, ModifyIndex: *j.ModifyIndex}
	for _, tg := range j.TaskGroups {
		sum.Summary[*tg.Name] = api.TaskGroupSummary{}
	}
	for _, as := range a.allocs {
		al := as.alloc
		if al.JobID != *j.ID || al.Namespace != *j.Namespace {
			continue
		}
		s := sum.Summary[al.TaskGroup]
		switch al.ClientStatus {
		case api.AllocClientStatusPending:
			s.Starting++
		case api.AllocClientStatusRunning:
			s.Running++
		case api.AllocClientStatusComplete:
			s.Complete++
		case api.AllocClientStatusFailed:
			s.Failed++
		case api.AllocClientStatusLost:
			s.Lost++
		}
		sum.Summary[al.TaskGroup] = s
	}
	for _, ev := range a.evals {
		if ev.JobID == *j.ID && ev.Namespace == *j.Namespace && ev.Status == api.EvalStatusBlocked {
			for tg, n := range ev.QueuedAllocations {
				s := sum.Summary[tg]
				s.Queued += n
				sum.Summary[tg] = s
			}
		}
	}
	if j.ParameterizedJob != nil && !j.Dispatched || j.Periodic != nil {
		ch := &api.JobChildrenSummary{}
		for _, other := range a.jobs {
			if *other.job.ParentID == *j.ID && *other.job.Namespace == *j.Namespace {
				switch *other.job.Status {
				case "pending":
					ch.Pending++
				case "running":
					ch.Running++
				default:
					ch.Dead++
				}
			}
		}
		sum.Children = ch
	}
	return sum
}

func (a *Agent) jobGet(rc *reqCtx, id string) error {
	k := jobKey{rc.ns, id}
	return a.blockingQuery(rc, func() uint64 {
		if js := a.jobs[k]; js != nil {
			return *js.job.ModifyIndex
		}
		return a.tableIndexLocked("jobs")
	}, func() (any, uint64, error) {
		js := a.jobs[k]
		if js == nil {
			return nil, 0, errorf(404, "%s", errJobNotFound)
		}
		return js.job, *js.job.ModifyIndex, nil
	})
}

func (a *Agent) jobSummaryGet(rc *reqCtx, id string) error {
	k := jobKey{rc.ns, id}
	return a.blockingQuery(rc, func() uint64 { return a.tableIndexLocked("jobs", "allocs") },
		func() (any, uint64, error) {
			js := a.jobs[k]
			if js == nil {
				return nil, 0, errorf(404, "%s", errJobNotFound)
			}
			return a.jobSummaryLocked(js), a.tableIndexLocked("jobs", "allocs"), nil
		})
}

func (a *Agent) jobAllocs(rc *reqCtx, id string) error {
	k := jobKey{rc.ns, id}
	all := rc.r.URL.Query().Get("all") == "true"
	return a.blockingQuery(rc, func() uint64 {
		m := a.deleted[k]
		for _, as := range a.allocs {
			if as.alloc.JobID == id && as.alloc.Namespace == rc.ns && as.alloc.ModifyIndex > m {
				m = as.alloc.ModifyIndex
			}
		}
		return m
	}, func() (any, uint64, error) {
		out := []*api.AllocationListStub{}
		js := a.jobs[k]
		for _, as := range a.allocs {
			al := as.alloc
			if al.JobID != id || al.Namespace != rc.ns {
				continue
			}
			// Without ?all=true Nomad lists the allocations of the job's
			// current incarnation (same CreateIndex).
			if !all && js != nil && al.Job != nil && *al.Job.CreateIndex != *js.job.CreateIndex {
				continue
			}
			out = append(out, allocStub(al))
		}
		sortStubs(out)
		return out, a.tableIndexLocked("allocs"), nil
	})
}

func (a *Agent) jobEvals(rc *reqCtx, id string) error {
	return a.blockingQuery(rc, func() uint64 {
		m := a.deleted[jobKey{rc.ns, id}]
		for _, ev := range a.evals {
			if ev.JobID == id && ev.Namespace == rc.ns && ev.ModifyIndex > m {
				m = ev.ModifyIndex
			}
		}
		return m
	}, func() (any, uint64, error) {
		out := []*api.Evaluation{}
		for _, ev := range a.evals {
			if ev.JobID == id && ev.Namespace == rc.ns {
				out = append(out, ev)
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].CreateIndex > out[j].CreateIndex })
		return out, a.tableIndexLocked("evals"), nil
	})
}

func (a *Agent) jobEvaluate(rc *reqCtx, id string) error {
	if rc.r.Method != http.MethodPut && rc.r.Method != http.MethodPost {
		return errorf(405, "%s", errInvalidMethod)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	js := a.jobs[jobKey{rc.ns, id}]
	if js == nil {
		return errorf(404, "%s", errJobNotFound)
	}
	if isParentJob(js.job) {
		return errorf(400, "can't evaluate periodic or parameterized job")
	}
	ev := a.scheduleLocked(js, "job-register")
	return a.writeResult(rc, a.index, &api.JobRegisterResponse{EvalID: ev.ID, EvalCreateIndex: ev.CreateIndex,
		JobModifyIndex: *js.job.JobModifyIndex})
}

// ---- allocations ----

func allocStub(al *api.Allocation) *api.AllocationListStub {
	s := &api.AllocationListStub{
		ID: al.ID, EvalID: al.EvalID, Name: al.Name, Namespace: al.Namespace, NodeID: al.NodeID, NodeName: al.NodeName,
		JobID: al.JobID, TaskGroup: al.TaskGroup, AllocatedResources: al.AllocatedResources,
		DesiredStatus: al.DesiredStatus, DesiredDescription: al.DesiredDescription,
		ClientStatus: al.ClientStatus, ClientDescription: al.ClientDescription, TaskStates: al.TaskStates,
		FollowupEvalID: al.FollowupEvalID, NextAllocation: al.NextAllocation,
		CreateIndex: al.CreateIndex, ModifyIndex: al.ModifyIndex, CreateTime: al.CreateTime, ModifyTime: al.ModifyTime,
	}
	if al.Job != nil {
		s.JobType = *al.Job.Type
		s.JobVersion = *al.Job.Version
	}
	return s
}

func sortStubs(out []*api.AllocationListStub) {
	sort.Slice(out, func(i, j int) bool { return out[i].CreateIndex > out[j].CreateIndex })
}

func (a *Agent) allocsList(rc *reqCtx) error {
	prefix := rc.r.URL.Query().Get("prefix")
	return a.blockingQuery(rc, func() uint64 { return a.tableIndexLocked("allocs") },
		func() (any, uint64, error) {
			out := []*api.AllocationListStub{}
			for _, as := range a.allocs {
				if (rc.ns == "*" || as.alloc.Namespace == rc.ns) && strings.HasPrefix(as.alloc.ID, prefix) {
					out = append(out, allocStub(as.alloc))
				}
			}
			sortStubs(out)
			return out, a.tableIndexLocked("allocs"), nil
		})
}

func (a *Agent) allocGet(rc *reqCtx, id string) error {
	return a.blockingQuery(rc, func() uint64 {
		if as := a.allocs[id]; as != nil {
			return as.alloc.ModifyIndex
		}
		return a.tableIndexLocked("allocs")
	}, func() (any, uint64, error) {
		as := a.allocs[id]
		if as == nil {
			return nil, 0, errorf(404, "%s", errAllocNotFound)
		}
		return as.alloc, as.alloc.ModifyIndex, nil
	})
}

// allocStop stops one allocation. Nomad then places a replacement for
// service jobs; this agent re-runs the scheduler for the job, which does
// the same when the group's count is not met.
func (a *Agent) allocStop(rc *reqCtx, id string) error {
	if rc.r.Method != http.MethodPut && rc.r.Method != http.MethodPost {
		return errorf(405, "%s", errInvalidMethod)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	as := a.allocs[id]
	if as == nil {
		return errorf(404, "%s", errAllocNotFound)
	}
	// As Nomad: a migrate transition first (AllocationUpdateDesiredStatus),
	// then the plan that stops it.
	as.alloc.DesiredTransition.Migrate = ptr(true)
	a.touchAllocLocked(as, evDesiredStatus)
	a.stopAllocLocked(as, "alloc is being migrated")
	// As on a real agent, the replacement is placed about a second after
	// the stop (Nomad records a migrate transition first), not at once.
	k := jobKey{as.alloc.Namespace, as.alloc.JobID}
	time.AfterFunc(time.Second, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.ctx.Err() != nil {
			return
		}
		if js := a.jobs[k]; js != nil && !*js.job.Stop {
			a.scheduleLocked(js, "alloc-stop")
		}
	})
	return a.writeResult(rc, a.index, &api.AllocStopResponse{})
}

// ---- evaluations ----

func (a *Agent) evalsList(rc *reqCtx) error {
	prefix := rc.r.URL.Query().Get("prefix")
	return a.blockingQuery(rc, func() uint64 { return a.tableIndexLocked("evals") },
		func() (any, uint64, error) {
			out := []*api.Evaluation{}
			for _, ev := range a.evals {
				if (rc.ns == "*" || ev.Namespace == rc.ns) && strings.HasPrefix(ev.ID, prefix) {
					out = append(out, ev)
				}
			}
			sort.Slice(out, func(i, j int) bool { return out[i].CreateIndex > out[j].CreateIndex })
			return out, a.tableIndexLocked("evals"), nil
		})
}

func (a *Agent) evalGet(rc *reqCtx, id string) error {
	return a.blockingQuery(rc, func() uint64 {
		if ev := a.evals[id]; ev != nil {
			return ev.ModifyIndex
		}
		return a.tableIndexLocked("evals")
	}, func() (any, uint64, error) {
		ev := a.evals[id]
		if ev == nil {
			return nil, 0, errorf(404, "%s", errEvalNotFound)
		}
		return ev, ev.ModifyIndex, nil
	})
}

func (a *Agent) evalAllocs(rc *reqCtx, id string) error {
	return a.blockingQuery(rc, func() uint64 { return a.tableIndexLocked("allocs") },
		func() (any, uint64, error) {
			out := []*api.AllocationListStub{}
			for _, as := range a.allocs {
				if as.alloc.EvalID == id {
					out = append(out, allocStub(as.alloc))
				}
			}
			sortStubs(out)
			return out, a.tableIndexLocked("allocs"), nil
		})
}

// ---- nodes, agent, status ----

func (a *Agent) nodesList(rc *reqCtx) error {
	return a.blockingQuery(rc, func() uint64 { return a.tableIndexLocked("nodes") },
		func() (any, uint64, error) {
			n := a.node
			stub := &api.NodeListStub{
				Address: "127.0.0.1", ID: n.ID, Datacenter: n.Datacenter, Name: n.Name, NodeClass: n.NodeClass,
				NodePool: n.NodePool, Version: Version, SchedulingEligibility: n.SchedulingEligibility,
				Status: n.Status, Drivers: n.Drivers, CreateIndex: n.CreateIndex, ModifyIndex: n.ModifyIndex,
			}
			if rc.r.URL.Query().Get("resources") == "true" {
				stub.NodeResources = n.NodeResources
				stub.ReservedResources = n.ReservedResources
			}
			if rc.r.URL.Query().Get("os") == "true" {
				stub.Attributes = map[string]string{"os.name": n.Attributes["os.name"]}
			}
			return []*api.NodeListStub{stub}, a.tableIndexLocked("nodes"), nil
		})
}

func (a *Agent) nodeGet(rc *reqCtx, id string) error {
	if rest, ok := strings.CutSuffix(id, "/allocations"); ok {
		id = rest
		return a.blockingQuery(rc, func() uint64 { return a.tableIndexLocked("allocs") },
			func() (any, uint64, error) {
				if id != a.nodeID {
					return []*api.Allocation{}, a.tableIndexLocked("allocs"), nil
				}
				out := []*api.Allocation{}
				for _, as := range a.allocs {
					out = append(out, as.alloc)
				}
				sort.Slice(out, func(i, j int) bool { return out[i].CreateIndex > out[j].CreateIndex })
				return out, a.tableIndexLocked("allocs"), nil
			})
	}
	return a.blockingQuery(rc, func() uint64 { return a.tableIndexLocked("nodes") },
		func() (any, uint64, error) {
			if id != a.nodeID {
				return nil, 0, errorf(404, "%s", errNodeNotFound)
			}
			return a.node, a.node.ModifyIndex, nil
		})
}

func (a *Agent) agentSelf(rc *reqCtx) error {
	host, port := splitHostPort(a.Addr())
	self := &api.AgentSelf{
		Config: map[string]any{
			"Region":     a.cfg.Region,
			"Datacenter": a.cfg.Datacenter,
			"NodeName":   a.cfg.NodeName,
			"DataDir":    a.cfg.DataDir,
			"Version":    map[string]any{"Version": Version, "VersionPrerelease": "", "VersionMetadata": "testagent"},
			"Client":     map[string]any{"Enabled": true},
			"Server":     map[string]any{"Enabled": true},
			"ACL":        map[string]any{"Enabled": a.cfg.ACLToken != ""},
			"Ports":      map[string]any{"HTTP": port},
			"Addresses":  map[string]any{"HTTP": host},
			"DevMode":    true,
		},
		Member: api.AgentMember{
			Name: a.cfg.NodeName + "." + a.cfg.Region, Addr: "127.0.0.1", Port: 4648, Status: "alive",
			Tags: map[string]string{"region": a.cfg.Region, "dc": a.cfg.Datacenter, "role": "nomad",
				"build": Version, "bootstrap": "1", "expect": "1"},
		},
		Stats: map[string]map[string]string{
			"nomad":   {"leader": "true", "server": "true", "known_regions": "1"},
			"client":  {"node_id": a.nodeID, "known_servers": "127.0.0.1:4647"},
			"runtime": {"goroutines": "0", "version": "go"},
		},
	}
	return writeJSONPlain(rc, self)
}

func (a *Agent) agentHealth(rc *reqCtx) error {
	return writeJSONPlain(rc, map[string]any{
		"client": map[string]any{"ok": true, "message": "ok"},
		"server": map[string]any{"ok": true, "message": "ok"},
	})
}

func (a *Agent) agentMembers(rc *reqCtx) error {
	return writeJSONPlain(rc, &api.ServerMembers{ServerName: a.cfg.NodeName, ServerRegion: a.cfg.Region,
		ServerDC: a.cfg.Datacenter, Members: []*api.AgentMember{{Name: a.cfg.NodeName + "." + a.cfg.Region,
			Addr: "127.0.0.1", Port: 4648, Status: "alive"}}})
}

func (a *Agent) statusLeader(rc *reqCtx) error {
	return writeJSONPlain(rc, "127.0.0.1:4647")
}

func (a *Agent) statusPeers(rc *reqCtx) error {
	return writeJSONPlain(rc, []string{"127.0.0.1:4647"})
}

func splitHostPort(addr string) (string, int) {
	i := strings.LastIndex(addr, ":")
	if i < 0 {
		return addr, 0
	}
	p := 0
	for _, c := range addr[i+1:] {
		p = p*10 + int(c-'0')
	}
	return addr[:i], p
}

// ---- namespaces ----

func (a *Agent) namespacesList(rc *reqCtx) error {
	return a.blockingQuery(rc, func() uint64 { return a.tableIndexLocked("namespaces") },
		func() (any, uint64, error) {
			out := []*api.Namespace{}
			for _, ns := range a.namespaces {
				out = append(out, ns)
			}
			sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
			return out, a.tableIndexLocked("namespaces"), nil
		})
}

func (a *Agent) namespaceOne(rc *reqCtx, name string) error {
	switch rc.r.Method {
	case http.MethodGet:
		return a.blockingQuery(rc, func() uint64 { return a.tableIndexLocked("namespaces") },
			func() (any, uint64, error) {
				ns := a.namespaces[name]
				if ns == nil {
					return nil, 0, errorf(404, "Namespace not found")
				}
				return ns, ns.ModifyIndex, nil
			})
	case http.MethodPut, http.MethodPost:
		var ns api.Namespace
		if err := decodeJSON(rc.r, &ns); err != nil {
			return err
		}
		if ns.Name == "" {
			ns.Name = name
		}
		if name != "" && ns.Name != name {
			return errorf(400, "Namespace name does not match request path")
		}
		if ns.Name == "" {
			return errorf(400, "Namespace name must be specified")
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		a.addNamespaceLocked(ns.Name, ns.Description)
		setWriteMeta(rc.w, a.index)
		rc.w.WriteHeader(200)
		return nil
	case http.MethodDelete:
		a.mu.Lock()
		defer a.mu.Unlock()
		if name == api.DefaultNamespace {
			return errorf(400, "default namespace can not be deleted")
		}
		for k := range a.jobs {
			if k.ns == name {
				return errorf(400, "namespace %q has non-terminal jobs in regions: [%s]", name, a.cfg.Region)
			}
		}
		delete(a.namespaces, name)
		setWriteMeta(rc.w, a.bumpLocked("namespaces"))
		rc.w.WriteHeader(200)
		return nil
	}
	return errorf(405, "%s", errInvalidMethod)
}

// systemGC removes terminal allocations and evaluations of jobs that no
// longer exist, and stopped jobs whose allocations are all terminal, like
// `nomad system gc`.
func (a *Agent) systemGC(rc *reqCtx) error {
	if rc.r.Method != http.MethodPut && rc.r.Method != http.MethodPost {
		return errorf(405, "%s", errInvalidMethod)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	idx := a.bumpLocked("allocs", "evals", "jobs")
	for k, js := range a.jobs {
		if *js.job.Stop && !a.jobHasLiveAllocsLocked(k) {
			delete(a.jobs, k)
		}
	}
	for id, as := range a.allocs {
		k := jobKey{as.alloc.Namespace, as.alloc.JobID}
		if a.jobs[k] == nil && as.terminalLocked() && as.finished() {
			delete(a.allocs, id)
			a.deleted[k] = idx
		}
	}
	for id, ev := range a.evals {
		k := jobKey{ev.Namespace, ev.JobID}
		if a.jobs[k] == nil {
			delete(a.evals, id)
			a.deleted[k] = idx
		}
	}
	setWriteMeta(rc.w, idx)
	rc.w.WriteHeader(200)
	return nil
}

var _ = json.Marshal
var _ = os.Getpid
var _ = time.Now

// fsRead serves GET /v1/client/fs/cat/:alloc?path= and, with readAt,
// /v1/client/fs/readat/:alloc?path=&offset=&limit=: a file of the
// allocation directory (<alloc>/alloc/logs/<task>.stderr.0, <alloc>/<task>/local/...).
func (a *Agent) fsRead(rc *reqCtx, id string, readAt bool) error {
	a.mu.Lock()
	as := a.allocs[id]
	a.mu.Unlock()
	if as == nil {
		return errorf(404, "%s", errAllocNotFound)
	}
	q := rc.r.URL.Query()
	rel := filepath.Clean("/" + q.Get("path"))
	f, err := os.Open(filepath.Join(as.dir, rel))
	if err != nil {
		return errorf(500, "failed to open file %q: %v", q.Get("path"), err)
	}
	defer f.Close()
	var r io.Reader = f
	if readAt {
		off, _ := strconv.ParseInt(q.Get("offset"), 10, 64)
		limit, _ := strconv.ParseInt(q.Get("limit"), 10, 64)
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return errorf(500, "%v", err)
		}
		if limit > 0 {
			r = io.LimitReader(f, limit)
		}
	}
	rc.w.Header().Set("Content-Type", "application/octet-stream")
	rc.w.WriteHeader(200)
	_, _ = io.Copy(rc.w, r)
	return nil
}
