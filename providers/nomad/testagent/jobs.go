package testagent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
)

// jobRegister serves PUT/POST /v1/jobs and PUT/POST /v1/job/:id.
func (a *Agent) jobRegister(rc *reqCtx, pathID string) error {
	var req api.JobRegisterRequest
	if err := decodeJSON(rc.r, &req); err != nil {
		return err
	}
	if req.Job == nil {
		return errorf(400, "Job must be specified")
	}
	job := req.Job
	if pathID != "" && (job.ID == nil || *job.ID != pathID) {
		return errorf(400, "Job ID does not match name")
	}
	if job.Namespace == nil || *job.Namespace == "" {
		ns := rc.r.URL.Query().Get("namespace")
		if ns == "" {
			ns = api.DefaultNamespace
		}
		job.Namespace = &ns
	}
	if job.Region == nil || *job.Region == "" {
		job.Region = &a.cfg.Region
	}
	if *job.Region != a.cfg.Region {
		return errorf(500, "%s", errNoRegionPath)
	}
	// Nomad's HTTP agent canonicalizes the api.Job (the same function the
	// api module exports) before converting it; defaults such as the
	// restart policy per job type, KillTimeout 5s, CPU 100 / 300 MB and
	// artifact destinations come from there.
	job.Canonicalize()
	if len(job.Datacenters) == 0 {
		job.Datacenters = []string{"*"}
	}
	if err := validateJob(job); err != nil {
		return errorf(500, "%s", err.Error())
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	if a.namespaces[*job.Namespace] == nil {
		return errorf(400, "job %q is in nonexistent namespace %q", *job.ID, *job.Namespace)
	}
	k := jobKey{*job.Namespace, *job.ID}
	old := a.jobs[k]
	if req.EnforceIndex {
		switch {
		case req.JobModifyIndex == 0 && old != nil:
			return errorf(500, "Enforcing job modify index 0: job already exists")
		case req.JobModifyIndex != 0 && old == nil:
			return errorf(500, "Enforcing job modify index %d: job does not exist", req.JobModifyIndex)
		case old != nil && req.JobModifyIndex != *old.job.JobModifyIndex:
			return errorf(500, "Enforcing job modify index %d: job exists with conflicting job modify index: %d",
				req.JobModifyIndex, *old.job.JobModifyIndex)
		}
	}
	js := a.upsertJobLocked(k, job, old)
	resp := &api.JobRegisterResponse{JobModifyIndex: *js.job.JobModifyIndex}
	if !isParentJob(js.job) {
		ev := a.scheduleLocked(js, "job-register")
		resp.EvalID, resp.EvalCreateIndex = ev.ID, ev.CreateIndex
	}
	return a.writeResult(rc, a.index, resp)
}

// isParentJob reports a periodic or (undispatched) parameterized job: such
// jobs get no evaluation and no allocations themselves.
func isParentJob(j *api.Job) bool {
	return j.Periodic != nil || (j.ParameterizedJob != nil && !j.Dispatched)
}

// specOf renders the job without status, indexes and group counts, to
// tell a destructive update from a no-op or a count change.
func specOf(j *api.Job) string {
	c := copyJob(j)
	c.Status, c.StatusDescription, c.CreateIndex, c.ModifyIndex, c.JobModifyIndex = nil, nil, nil, nil, nil
	c.SubmitTime, c.Version, c.Stable, c.Stop = nil, nil, nil, nil
	for _, tg := range c.TaskGroups {
		tg.Count = nil
	}
	b, _ := json.Marshal(c)
	return string(b)
}

func copyJob(j *api.Job) *api.Job {
	b, err := json.Marshal(j)
	if err != nil {
		panic(err)
	}
	var c api.Job
	if err := json.Unmarshal(b, &c); err != nil {
		panic(err)
	}
	return &c
}

func (a *Agent) upsertJobLocked(k jobKey, job *api.Job, old *jobState) *jobState {
	idx := a.bumpLocked("jobs")
	now := time.Now().UnixNano()
	status, desc := "pending", ""
	job.Status, job.StatusDescription = &status, &desc
	job.ModifyIndex, job.JobModifyIndex, job.SubmitTime = ptr(idx), ptr(idx), &now
	stable := false
	job.Stable = &stable
	if old == nil {
		job.CreateIndex, job.Version = ptr(idx), ptr(uint64(0))
		js := &jobState{job: job, spec: specOf(job)}
		a.jobs[k] = js
		a.updateJobStatusLocked(js)
		return js
	}
	spec := specOf(job)
	// A stopped job registered again starts a new incarnation only after
	// purge; Nomad keeps CreateIndex across updates.
	job.CreateIndex = old.job.CreateIndex
	v := *old.job.Version
	if spec != old.spec || *job.Stop != *old.job.Stop || countsDiffer(job, old.job) {
		v++
	}
	job.Version = &v
	if spec != old.spec {
		old.specVersion++
	}
	old.job, old.spec = job, spec
	a.updateJobStatusLocked(old)
	return old
}

func countsDiffer(x, y *api.Job) bool {
	m := map[string]int{}
	for _, tg := range x.TaskGroups {
		m[*tg.Name] = *tg.Count
	}
	for _, tg := range y.TaskGroups {
		if c, ok := m[*tg.Name]; !ok || c != *tg.Count {
			return true
		}
	}
	return len(x.TaskGroups) != len(y.TaskGroups)
}

func ptr[T any](v T) *T { return &v }

// updateJobStatusLocked derives the job status as Nomad does: "running"
// while any allocation is non-terminal, "dead" once a stopped or batch job
// has no live allocation and nothing queued, "pending" otherwise.
func (a *Agent) updateJobStatusLocked(js *jobState) {
	j := js.job
	k := jobKey{*j.Namespace, *j.ID}
	var status string
	switch {
	case isParentJob(j):
		status = "running"
		if *j.Stop {
			status = "dead"
		}
	case a.jobHasLiveAllocsLocked(k):
		status = "running"
	case *j.Stop:
		status = "dead"
	default:
		queued, any := false, false
		for _, ev := range a.evals {
			if ev.JobID == k.id && ev.Namespace == k.ns && ev.Status == api.EvalStatusBlocked {
				queued = true
			}
		}
		for _, as := range a.allocs {
			if as.alloc.JobID == k.id && as.alloc.Namespace == k.ns {
				any = true
			}
		}
		switch {
		case queued || !any:
			status = "pending"
		default:
			status = "dead"
		}
	}
	if *j.Status != status {
		*j.Status = status
		j.ModifyIndex = ptr(a.bumpLocked("jobs"))
	}
}

func (a *Agent) jobHasLiveAllocsLocked(k jobKey) bool {
	for _, as := range a.allocs {
		if as.alloc.JobID == k.id && as.alloc.Namespace == k.ns && !as.clientTerminal() {
			return true
		}
	}
	return false
}

// jobDeregister serves DELETE /v1/job/:id[?purge=true].
func (a *Agent) jobDeregister(rc *reqCtx, id string) error {
	purge := rc.r.URL.Query().Get("purge") == "true"
	a.mu.Lock()
	defer a.mu.Unlock()
	k := jobKey{rc.ns, id}
	js := a.jobs[k]
	resp := &api.JobDeregisterResponse{}
	if js != nil {
		parent := isParentJob(js.job)
		if !*js.job.Stop {
			js.job.Stop = ptr(true)
			js.job.Version = ptr(*js.job.Version + 1)
			idx := a.bumpLocked("jobs")
			js.job.ModifyIndex, js.job.JobModifyIndex = ptr(idx), ptr(idx)
		}
		resp.JobModifyIndex = *js.job.JobModifyIndex
		if purge {
			delete(a.jobs, k)
			a.bumpLocked("jobs")
		}
		// Nomad creates no evaluation for periodic/parameterized parents.
		if !parent {
			ev := a.scheduleLocked(js, "job-deregister")
			resp.EvalID, resp.EvalCreateIndex = ev.ID, ev.CreateIndex
		}
		if !purge {
			a.updateJobStatusLocked(js)
		}
	} else {
		// Like Nomad, deregistering an unknown job is not an error, and
		// it creates no evaluation (EvalID "").
	}
	return a.writeResult(rc, a.index, resp)
}

// jobDispatch serves PUT/POST /v1/job/:id/dispatch.
func (a *Agent) jobDispatch(rc *reqCtx, id string) error {
	if rc.r.Method != http.MethodPut && rc.r.Method != http.MethodPost {
		return errorf(405, "%s", errInvalidMethod)
	}
	var req api.JobDispatchRequest
	if err := decodeJSON(rc.r, &req); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	parent := a.jobs[jobKey{rc.ns, id}]
	if parent == nil {
		return errorf(404, "%s", errJobNotFound)
	}
	pj := parent.job
	if pj.ParameterizedJob == nil || pj.Dispatched {
		return errorf(500, "Specified job is not a parameterized job")
	}
	if *pj.Stop {
		return errorf(500, "Job %q is stopped", id)
	}
	p := pj.ParameterizedJob
	switch {
	case len(req.Payload) > 0 && p.Payload == "forbidden":
		return errorf(500, "Payload provided but forbidden by parameterized job")
	case len(req.Payload) == 0 && p.Payload == "required":
		return errorf(500, "Payload is not provided but required by parameterized job")
	}
	allowed := map[string]bool{}
	for _, m := range append(append([]string{}, p.MetaRequired...), p.MetaOptional...) {
		allowed[m] = true
	}
	var unpermitted, missing []string
	for key := range req.Meta {
		if !allowed[key] {
			unpermitted = append(unpermitted, key)
		}
	}
	for _, m := range p.MetaRequired {
		if _, ok := req.Meta[m]; !ok {
			missing = append(missing, m)
		}
	}
	sort.Strings(unpermitted)
	if len(unpermitted) > 0 {
		return errorf(500, "Dispatch request included unpermitted metadata keys: %v", unpermitted)
	}
	if len(missing) > 0 {
		return errorf(500, "Dispatch did not provide required meta keys: %v", missing)
	}
	child := copyJob(pj)
	suffix := newUUID()[:8]
	childID := fmt.Sprintf("%s/dispatch-%d-%s", id, time.Now().Unix(), suffix)
	if req.IdPrefixTemplate != "" {
		childID = fmt.Sprintf("%s/dispatch-%s-%d-%s", id, req.IdPrefixTemplate, time.Now().Unix(), suffix)
	}
	child.ID, child.Name, child.ParentID = &childID, &childID, &id
	child.Dispatched = true
	child.Payload = req.Payload
	if child.Meta == nil {
		child.Meta = map[string]string{}
	}
	for k, v := range req.Meta {
		child.Meta[k] = v
	}
	js := a.upsertJobLocked(jobKey{rc.ns, childID}, child, nil)
	ev := a.scheduleLocked(js, "job-register")
	a.updateJobStatusLocked(parent)
	return a.writeResult(rc, a.index, &api.JobDispatchResponse{DispatchedJobID: childID, EvalID: ev.ID,
		EvalCreateIndex: ev.CreateIndex, JobCreateIndex: *js.job.CreateIndex})
}

// ---- validation ----

type multiErr []string

func (m *multiErr) add(format string, args ...any) { *m = append(*m, fmt.Sprintf(format, args...)) }

// Error formats like hashicorp/go-multierror, which Nomad's validation
// errors use.
func (m multiErr) Error() string {
	var b strings.Builder
	if len(m) == 1 {
		b.WriteString("1 error occurred:\n")
	} else {
		fmt.Fprintf(&b, "%d errors occurred:\n", len(m))
	}
	for _, e := range m {
		fmt.Fprintf(&b, "\t* %s\n", e)
	}
	b.WriteString("\n")
	return b.String()
}

var supportedDrivers = map[string]bool{"raw_exec": true, "exec": true}

func validateJob(j *api.Job) error {
	var errs multiErr
	id := *j.ID
	switch {
	case id == "":
		errs.add("Missing job ID")
	case strings.Contains(id, " "):
		errs.add("Job ID contains a space")
	case strings.Contains(id, "\x00"):
		errs.add("Job ID contains a null character")
	}
	if *j.Name == "" {
		errs.add("Missing job name")
	}
	switch *j.Type {
	case "service", "batch":
	case "system", "sysbatch":
		errs.add("Job type %q is not supported by the gofl Nomad test agent (only service and batch)", *j.Type)
	default:
		errs.add("Invalid job type: %q", *j.Type)
	}
	if p := *j.Priority; p < 1 || p > 100 {
		errs.add("Job priority must be between [1, 100]")
	}
	for _, dc := range j.Datacenters {
		if dc == "" {
			errs.add("datacenter must be non-empty string")
		}
	}
	if len(j.TaskGroups) == 0 {
		errs.add("Missing job task groups")
	}
	if j.ParameterizedJob != nil {
		if *j.Type != "batch" {
			errs.add("Parameterized job can only be used with %q or %q scheduler", "batch", "sysbatch")
		}
		switch j.ParameterizedJob.Payload {
		case "", "optional", "required", "forbidden":
		default:
			errs.add("Unknown payload requirement: %q", j.ParameterizedJob.Payload)
		}
	}
	if j.Periodic != nil && (j.Periodic.Enabled == nil || *j.Periodic.Enabled) {
		errs.add("Periodic jobs are not supported by the gofl Nomad test agent")
	}
	for _, c := range j.Constraints {
		validateConstraint(&errs, "", c)
	}
	groups := map[string]int{}
	for i, tg := range j.TaskGroups {
		name := *tg.Name
		if name == "" {
			errs.add("Job task group %d missing name", i+1)
			continue
		}
		if prev, ok := groups[name]; ok {
			errs.add("Job task group %d redefines '%s' from group %d", i+1, name, prev+1)
			continue
		}
		groups[name] = i
		prefix := fmt.Sprintf("Task group %s validation failed: ", name)
		if *tg.Count < 0 {
			errs.add("%sTask group count can't be negative", prefix)
		}
		if len(tg.Tasks) == 0 {
			errs.add("%sMissing tasks for task group", prefix)
		}
		validateRestart(&errs, prefix, tg.RestartPolicy)
		for _, c := range tg.Constraints {
			validateConstraint(&errs, prefix, c)
		}
		tasks := map[string]bool{}
		for ti, t := range tg.Tasks {
			if t.Name == "" {
				errs.add("%sTask %d missing name", prefix, ti+1)
				continue
			}
			if tasks[t.Name] {
				errs.add("%sTask %d redefines '%s'", prefix, ti+1, t.Name)
				continue
			}
			tasks[t.Name] = true
			tp := prefix + fmt.Sprintf("Task %s validation failed: ", t.Name)
			if strings.Contains(t.Name, "/") {
				errs.add("%sTask name cannot include slashes", tp)
			}
			if t.Driver == "" {
				errs.add("%sMissing task driver", tp)
			}
			if r := t.Resources; r != nil {
				if r.CPU != nil && *r.CPU < 1 && (r.Cores == nil || *r.Cores == 0) {
					errs.add("%sminimum CPU value is 1; got %d", tp, *r.CPU)
				}
				if r.MemoryMB != nil && *r.MemoryMB < 10 {
					errs.add("%sminimum MemoryMB value is 10; got %d", tp, *r.MemoryMB)
				}
			}
			if t.KillTimeout != nil && *t.KillTimeout < 0 {
				errs.add("%sKillTimeout must be a positive value", tp)
			}
			validateRestart(&errs, tp, t.RestartPolicy)
			for _, c := range t.Constraints {
				validateConstraint(&errs, tp, c)
			}
			for ai, art := range t.Artifacts {
				ap := fmt.Sprintf("%sArtifact %d validation failed: ", tp, ai)
				if art.GetterSource == nil || *art.GetterSource == "" {
					errs.add("%ssource must be specified", ap)
				}
				switch *art.GetterMode {
				case "any", "file", "dir":
				default:
					errs.add("%sinvalid artifact mode %q; must be one of: any, file, dir", ap, *art.GetterMode)
				}
				if cs, ok := art.GetterOptions["checksum"]; ok {
					if _, _, err := parseChecksum(cs); err != nil {
						errs.add("%s%v", ap, err)
					}
				}
				if art.RelativeDest != nil && escapes(*art.RelativeDest) {
					errs.add("%sdestination escapes allocation directory", ap)
				}
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}

func escapes(rel string) bool {
	if path.IsAbs(rel) {
		return true
	}
	c := path.Clean(rel)
	return c == ".." || strings.HasPrefix(c, "../")
}

func validateRestart(errs *multiErr, prefix string, rp *api.RestartPolicy) {
	if rp == nil {
		return
	}
	if rp.Mode != nil {
		switch *rp.Mode {
		case api.RestartPolicyModeDelay, api.RestartPolicyModeFail:
		default:
			errs.add("%sUnsupported restart mode: %q", prefix, *rp.Mode)
		}
	}
	if rp.Attempts != nil && *rp.Attempts < 0 {
		errs.add("%sRestart attempts can't be negative", prefix)
	}
	if rp.Delay != nil && *rp.Delay < 0 {
		errs.add("%sRestart delay can't be negative", prefix)
	}
	if rp.Interval != nil && rp.Attempts != nil && rp.Delay != nil && *rp.Attempts > 0 &&
		*rp.Interval < time.Duration(*rp.Attempts)*(*rp.Delay) && rp.Mode != nil && *rp.Mode == api.RestartPolicyModeDelay {
		errs.add("%sNomad can't restart the TaskGroup %v times in an interval of %v with a delay of %v",
			prefix, *rp.Attempts, *rp.Interval, *rp.Delay)
	}
}

var knownOperands = map[string]bool{"=": true, "==": true, "is": true, "!=": true, "not": true, "regexp": true,
	"is_set": true, "is_not_set": true, "set_contains": true, "set_contains_any": true, "distinct_hosts": true,
	"distinct_property": true, "<": true, "<=": true, ">": true, ">=": true, "version": true, "semver": true}

func validateConstraint(errs *multiErr, prefix string, c *api.Constraint) {
	if c == nil {
		return
	}
	op := c.Operand
	if op == "" {
		op = "="
	}
	if !knownOperands[op] {
		errs.add("%sUnknown constraint type %q", prefix, c.Operand)
	}
}
