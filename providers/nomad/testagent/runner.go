package testagent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/nomad/api"
)

// allocState is an allocation and its runner. alloc is guarded by Agent.mu.
type allocState struct {
	a           *Agent
	alloc       *api.Allocation
	job         *api.Job // the job version the allocation was placed with
	group       *api.TaskGroup
	index       int
	specVersion int
	cpu, mem    int
	ports       []api.PortMapping
	taskNets    map[string][]*api.NetworkResource
	dir         string

	stopOnce sync.Once
	stopCh   chan struct{} // closed when the tasks must be killed
	done     chan struct{} // closed when the runner has finished
}

func (as *allocState) requestStop() { as.stopOnce.Do(func() { close(as.stopCh) }) }

func (as *allocState) finished() bool {
	select {
	case <-as.done:
		return true
	default:
		return false
	}
}

// clientTerminal reports a terminal client status.
func (as *allocState) clientTerminal() bool {
	switch as.alloc.ClientStatus {
	case api.AllocClientStatusComplete, api.AllocClientStatusFailed, api.AllocClientStatusLost:
		return true
	}
	return false
}

// terminalLocked is Nomad's Allocation.TerminalStatus: desired stop/evict
// or a terminal client status. Terminal allocations hold no resources.
func (as *allocState) terminalLocked() bool {
	return as.alloc.DesiredStatus != api.AllocDesiredStatusRun || as.clientTerminal()
}

func (a *Agent) createAllocLocked(js *jobState, tg *api.TaskGroup, evalID string, index int, m *api.AllocationMetric,
	cpu, mem int, ports []api.PortMapping, shared []*api.NetworkResource, taskNets map[string][]*api.NetworkResource) {
	j := copyJob(js.job)
	var group *api.TaskGroup
	for _, g := range j.TaskGroups {
		if *g.Name == *tg.Name {
			group = g
		}
	}
	idx := a.bumpLocked("allocs")
	now := time.Now()
	id := newUUID()
	ar := &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{},
		Shared: api.AllocatedSharedResources{DiskMB: int64(valOr(tg.EphemeralDisk, 300)), Networks: shared, Ports: ports}}
	taskRes := map[string]*api.Resources{}
	states := map[string]*api.TaskState{}
	for _, t := range group.Tasks {
		tr := &api.AllocatedTaskResources{Cpu: api.AllocatedCpuResources{CpuShares: int64(*t.Resources.CPU)},
			Memory: api.AllocatedMemoryResources{MemoryMB: int64(*t.Resources.MemoryMB)}, Networks: taskNets[t.Name]}
		if t.Resources.MemoryMaxMB != nil {
			tr.Memory.MemoryMaxMB = int64(*t.Resources.MemoryMaxMB)
		}
		ar.Tasks[t.Name] = tr
		taskRes[t.Name] = t.Resources
		states[t.Name] = &api.TaskState{State: "pending", Events: []*api.TaskEvent{
			newEvent(api.TaskReceived, "Task received by client", nil)}}
	}
	al := &api.Allocation{
		ID: id, Namespace: *j.Namespace, EvalID: evalID, Name: fmt.Sprintf("%s.%s[%d]", *j.ID, *tg.Name, index),
		NodeID: a.nodeID, NodeName: a.cfg.NodeName, JobID: *j.ID, Job: j, TaskGroup: *tg.Name,
		Resources: &api.Resources{CPU: &cpu, MemoryMB: &mem}, TaskResources: taskRes, AllocatedResources: ar,
		Metrics: m, DesiredStatus: api.AllocDesiredStatusRun, ClientStatus: api.AllocClientStatusPending,
		TaskStates: states, CreateIndex: idx, ModifyIndex: idx, AllocModifyIndex: idx,
		CreateTime: now.UnixNano(), ModifyTime: now.UnixNano(),
	}
	as := &allocState{a: a, alloc: al, job: j, group: group, index: index, specVersion: js.specVersion,
		cpu: cpu, mem: mem, ports: ports, taskNets: taskNets, dir: filepath.Join(a.cfg.DataDir, "alloc", id),
		stopCh: make(chan struct{}), done: make(chan struct{})}
	// A replacement of an allocation stopped for migration (alloc stop)
	// is linked to it, as Nomad links them.
	for _, old := range a.allocsOfLocked(jobKey{al.Namespace, al.JobID}) {
		if old.alloc.TaskGroup == al.TaskGroup && old.index == index && old.alloc.NextAllocation == "" &&
			old.alloc.DesiredTransition.Migrate != nil && *old.alloc.DesiredTransition.Migrate {
			old.alloc.NextAllocation, al.PreviousAllocation = id, old.alloc.ID
		}
	}
	a.allocs[id] = as
	a.events.publish(a, as, evPlanResult)
	if a.closed {
		close(as.done)
		return
	}
	a.wg.Add(1)
	go as.run()
}

func valOr(d *api.EphemeralDisk, def int) int {
	if d != nil && d.SizeMB != nil {
		return *d.SizeMB
	}
	return def
}

func newEvent(typ, display string, details map[string]string) *api.TaskEvent {
	if details == nil {
		details = map[string]string{}
	}
	return &api.TaskEvent{Type: typ, Time: time.Now().UnixNano(), DisplayMessage: display, Details: details}
}

// updateTask applies fn to a task's state and recomputes the allocation's
// client status, as a Nomad client does when it syncs allocation updates.
func (as *allocState) updateTask(task string, fn func(ts *api.TaskState)) {
	as.a.mu.Lock()
	defer as.a.mu.Unlock()
	as.updateTaskLocked(task, fn)
}

func (as *allocState) updateTaskLocked(task string, fn func(ts *api.TaskState)) {
	a := as.a
	ts := as.alloc.TaskStates[task]
	wasTerminal := as.terminalLocked()
	fn(ts)
	as.alloc.ClientStatus, as.alloc.ClientDescription = clientStatus(as.alloc.TaskStates)
	a.touchAllocLocked(as, "")
	if js := a.jobs[jobKey{as.alloc.Namespace, as.alloc.JobID}]; js != nil {
		a.updateJobStatusLocked(js)
		if p := *js.job.ParentID; p != "" {
			if pj := a.jobs[jobKey{as.alloc.Namespace, p}]; pj != nil {
				pj.job.ModifyIndex = ptr(a.bumpLocked("jobs"))
			}
		}
	}
	if !wasTerminal && as.terminalLocked() {
		a.retryBlockedLocked()
	}
}

func (as *allocState) event(task string, ev *api.TaskEvent, fn func(ts *api.TaskState)) {
	as.a.mu.Lock()
	defer as.a.mu.Unlock()
	as.eventLocked(task, ev, fn)
}

func (as *allocState) eventLocked(task string, ev *api.TaskEvent, fn func(ts *api.TaskState)) {
	as.updateTaskLocked(task, func(ts *api.TaskState) {
		ts.Events = append(ts.Events, ev)
		if len(ts.Events) > 10 { // Nomad keeps the last 10 events per task
			ts.Events = ts.Events[len(ts.Events)-10:]
		}
		if fn != nil {
			fn(ts)
		}
	})
}

// clientStatus derives the allocation's client status from its tasks the
// way the Nomad client does.
func clientStatus(states map[string]*api.TaskState) (string, string) {
	var pending, running, dead, failed bool
	for _, ts := range states {
		switch ts.State {
		case "running":
			running = true
		case "pending":
			pending = true
		case "dead":
			if ts.Failed {
				failed = true
			} else {
				dead = true
			}
		}
	}
	switch {
	case failed:
		return api.AllocClientStatusFailed, "Failed tasks"
	case running:
		return api.AllocClientStatusRunning, "Tasks are running"
	case pending:
		return api.AllocClientStatusPending, "No tasks have started"
	case dead:
		return api.AllocClientStatusComplete, "All tasks have completed"
	}
	return api.AllocClientStatusPending, ""
}

func (as *allocState) run() {
	defer as.a.wg.Done()
	defer close(as.done)
	for _, d := range []string{"alloc/data", "alloc/logs", "alloc/tmp"} {
		if err := os.MkdirAll(filepath.Join(as.dir, d), 0o777); err != nil {
			as.a.log.Error().Err(err).Msg("alloc dir")
		}
	}
	var wg sync.WaitGroup
	for _, t := range as.group.Tasks {
		tr := &taskRunner{as: as, task: t}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr.run()
		}()
	}
	wg.Wait()
}

type taskRunner struct {
	as   *allocState
	task *api.Task
	dir  string
}

// restart tracker state, following Nomad's restart stanza semantics.
type restartTracker struct {
	policy *api.RestartPolicy
	start  time.Time
	count  int
}

// next decides what happens after the task ended (or failed to start):
// restart after delay, or stop. reason is the event message.
func (rt *restartTracker) next(now time.Time) (restart bool, delay time.Duration, reason string) {
	attempts, interval, d, mode := *rt.policy.Attempts, *rt.policy.Interval, *rt.policy.Delay, *rt.policy.Mode
	if rt.start.IsZero() || now.Sub(rt.start) > interval {
		rt.start, rt.count = now, 0
	}
	rt.count++
	if rt.count > attempts {
		if mode == api.RestartPolicyModeFail {
			if attempts == 0 {
				return false, 0, "Policy allows no restarts"
			}
			return false, 0, fmt.Sprintf("Exceeded allowed attempts %d in interval %v and mode is %q", attempts, interval, mode)
		}
		end := rt.start.Add(interval)
		rt.start, rt.count = time.Time{}, 0
		return true, end.Sub(now), "Exceeded allowed attempts, applying a delay"
	}
	return true, d, "Restart within policy"
}

func (tr *taskRunner) policy() *api.RestartPolicy {
	rp := *tr.as.group.RestartPolicy
	if t := tr.task.RestartPolicy; t != nil {
		rp.Merge(t)
	}
	return &rp
}

func (tr *taskRunner) killed() bool {
	select {
	case <-tr.as.stopCh:
		return true
	case <-tr.as.a.ctx.Done():
		return true
	default:
		return false
	}
}

func (tr *taskRunner) markDead(failed bool, ev *api.TaskEvent) {
	name := tr.task.Name
	fn := func(ts *api.TaskState) {
		ts.State, ts.Failed, ts.FinishedAt = "dead", failed, time.Now().UTC()
	}
	if ev != nil {
		tr.as.event(name, ev, fn)
	} else {
		tr.as.updateTask(name, fn)
	}
	if failed {
		// Nomad kills the other tasks of an allocation when one fails.
		tr.as.requestStop()
	}
}

func (tr *taskRunner) run() {
	as, t := tr.as, tr.task
	tr.dir = filepath.Join(as.dir, t.Name)
	for _, d := range []string{"local", "secrets", "tmp"} {
		_ = os.MkdirAll(filepath.Join(tr.dir, d), 0o777)
	}
	_ = os.Chmod(filepath.Join(tr.dir, "secrets"), 0o700)
	as.event(t.Name, newEvent(api.TaskSetup, "Building Task Directory", map[string]string{"message": "Building Task Directory"}), nil)
	if lag := as.a.cfg.StartLag; lag > 0 {
		timer := time.NewTimer(lag)
		select {
		case <-timer.C:
		case <-as.stopCh: // the start sees the stop
		}
		timer.Stop()
	}
	if len(as.job.Payload) > 0 && t.DispatchPayload != nil && t.DispatchPayload.File != "" {
		p := filepath.Join(tr.dir, "local", t.DispatchPayload.File)
		_ = os.MkdirAll(filepath.Dir(p), 0o777)
		_ = os.WriteFile(p, as.job.Payload, 0o666)
	}
	rt := &restartTracker{policy: tr.policy()}
	batch := *as.job.Type == "batch"
	for {
		if tr.killed() {
			tr.markDead(false, nil)
			return
		}
		exitOK, fatal := tr.attempt()
		if fatal {
			return
		}
		if tr.killed() {
			// The stop raced an attempt that ended on its own: the task is
			// dead all the same, as in Nomad.
			tr.markDead(false, nil)
			return
		}
		if batch && exitOK {
			tr.markDead(false, nil)
			return
		}
		restart, delay, reason := rt.next(time.Now())
		if !restart {
			tr.markDead(true, newEvent(api.TaskNotRestarting, reason,
				map[string]string{"restart_reason": reason, "fails_task": "true"}))
			return
		}
		ev := newEvent(api.TaskRestarting, fmt.Sprintf("Task restarting in %v", delay),
			map[string]string{"restart_reason": reason, "start_delay": strconv.FormatInt(int64(delay), 10)})
		ev.RestartReason, ev.StartDelay = reason, int64(delay)
		as.event(t.Name, ev, func(ts *api.TaskState) { ts.State = "pending" })
		timer := time.NewTimer(delay)
		select {
		case <-timer.C:
		case <-as.stopCh:
		case <-as.a.ctx.Done():
		}
		timer.Stop()
		if tr.killed() {
			tr.markDead(false, nil)
			return
		}
		as.updateTask(t.Name, func(ts *api.TaskState) { ts.Restarts++; ts.LastRestart = time.Now().UTC() })
	}
}

// attempt runs the task once: artifacts, start, wait. It returns whether
// the process exited successfully, and fatal when the task is already dead
// (killed, or an unrecoverable error).
func (tr *taskRunner) attempt() (exitOK, fatal bool) {
	as, t := tr.as, tr.task
	env := tr.buildEnv()
	interp := func(s string) string { return tr.interpolate(s, env) }
	if len(t.Artifacts) > 0 {
		as.event(t.Name, newEvent(api.TaskDownloadingArtifacts, "Client is downloading artifacts", nil), nil)
		for _, art := range t.Artifacts {
			if err := fetchArtifact(as.a.ctx, art, tr.dir, interp); err != nil {
				// Nomad runs go-getter in a subprocess: the task event says
				// only that it failed; the reason is in the agent's log.
				as.a.log.Warn().Err(err).Str("alloc", as.alloc.ID).Str("task", t.Name).Msg("artifact download failed")
				msg := fmt.Sprintf("failed to download artifact %q: getter subprocess failed: exit status 1", interp(*art.GetterSource))
				ev := newEvent(api.TaskArtifactDownloadFailed, msg, map[string]string{"download_error": msg})
				ev.DownloadError = msg
				as.event(t.Name, ev, nil)
				return false, false
			}
		}
	}
	cmd, err := tr.command(env, interp)
	if err != nil {
		ev := newEvent("Failed Validation", err.Error(), map[string]string{"validation_error": err.Error()})
		ev.ValidationError, ev.FailsTask = err.Error(), true
		tr.markDead(true, ev)
		return false, true
	}
	if t.Driver == "exec" && ExecIsolates() {
		isolate(cmd, tr.dir, filepath.Join(as.dir, "alloc"))
	}
	logDir := filepath.Join(as.dir, "alloc", "logs")
	stdout, err1 := os.OpenFile(filepath.Join(logDir, t.Name+".stdout.0"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o666)
	stderr, err2 := os.OpenFile(filepath.Join(logDir, t.Name+".stderr.0"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o666)
	if err := errors.Join(err1, err2); err != nil {
		closeAll(stdout, stderr)
		as.event(t.Name, driverFailure(err), nil)
		return false, false
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Start the process and mark the task running in one step under the
	// agent's lock, and not at all once the allocation was told to stop:
	// as in Nomad, an allocation that is to stop with no task running
	// starts none afterwards (the nomad provider relies on it when it
	// waits for a purged job's processes to be gone).
	as.a.mu.Lock()
	if tr.killed() {
		as.a.mu.Unlock()
		closeAll(stdout, stderr)
		return false, false // run sees the stop and marks the task dead
	}
	if err := cmd.Start(); err != nil {
		as.a.mu.Unlock()
		closeAll(stdout, stderr)
		as.event(t.Name, driverFailure(err), nil)
		return false, false
	}
	pid := cmd.Process.Pid
	as.eventLocked(t.Name, newEvent(api.TaskStarted, "Task started by client", map[string]string{"pid": strconv.Itoa(pid)}),
		func(ts *api.TaskState) { ts.State, ts.StartedAt = "running", time.Now().UTC() })
	as.a.mu.Unlock()
	closeAll(stdout, stderr)
	as.a.log.Debug().Str("alloc", as.alloc.ID).Str("task", t.Name).Int("pid", pid).Msg("task started")
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var waitErr error
	select {
	case waitErr = <-exited:
	case <-as.stopCh:
		tr.kill(cmd, exited, false)
		return false, true
	case <-as.a.ctx.Done():
		tr.kill(cmd, exited, true)
		return false, true
	}
	// Reap anything the task left behind in its process group.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	code, sig := exitStatus(cmd, waitErr)
	msg := fmt.Sprintf("Exit Code: %d", code)
	if sig != 0 {
		msg += fmt.Sprintf(", Signal: %d", sig)
	}
	ev := newEvent(api.TaskTerminated, msg, map[string]string{"exit_code": strconv.Itoa(code),
		"signal": strconv.Itoa(sig), "oom_killed": "false", "exit_message": ""})
	ev.ExitCode, ev.Signal = code, sig
	as.event(t.Name, ev, nil)
	return code == 0 && sig == 0, false
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			_ = f.Close()
		}
	}
}

func driverFailure(err error) *api.TaskEvent {
	ev := newEvent(api.TaskDriverFailure, err.Error(), map[string]string{"driver_error": err.Error()})
	ev.DriverError = err.Error()
	return ev
}

// exitStatus reports the exit code and signal the way Nomad's executor
// does: a process killed by signal N has Signal N and exit code 128+N.
func exitStatus(cmd *exec.Cmd, err error) (int, int) {
	if cmd.ProcessState == nil {
		return 1, 0
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		if ws.Signaled() {
			s := int(ws.Signal())
			return 128 + s, s
		}
		return ws.ExitStatus(), 0
	}
	if err != nil {
		return 1, 0
	}
	return 0, 0
}

// kill stops the task: kill_signal (default SIGINT, as Nomad) to the
// process, SIGKILL to its process group after kill_timeout. On agent
// shutdown (now) it SIGKILLs at once.
func (tr *taskRunner) kill(cmd *exec.Cmd, exited chan error, now bool) {
	as, t := tr.as, tr.task
	pid := cmd.Process.Pid
	if now {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		select {
		case <-exited:
		case <-time.After(as.a.cfg.KillOnCloseTimeout):
		}
		tr.markDead(false, nil)
		return
	}
	timeout := 5 * time.Second
	if t.KillTimeout != nil {
		timeout = *t.KillTimeout
	}
	sig := parseSignal(t.KillSignal)
	kev := newEvent(api.TaskKilling, fmt.Sprintf("Sent interrupt. Waiting %v before force killing", timeout),
		map[string]string{"kill_timeout": timeout.String()})
	kev.KillTimeout = timeout
	as.event(t.Name, kev, nil)
	_ = syscall.Kill(pid, sig)
	timer := time.NewTimer(timeout)
	select {
	case <-exited:
	case <-timer.C:
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-exited
	case <-as.a.ctx.Done():
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-exited
	}
	timer.Stop()
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	// As Nomad: Killing, then Terminated with the exit status, then Killed.
	code, signal := exitStatus(cmd, nil)
	msg := fmt.Sprintf("Exit Code: %d", code)
	if signal != 0 {
		msg += fmt.Sprintf(", Signal: %d", signal)
	}
	tev := newEvent(api.TaskTerminated, msg, map[string]string{"exit_code": strconv.Itoa(code),
		"signal": strconv.Itoa(signal), "oom_killed": "false", "exit_message": ""})
	tev.ExitCode, tev.Signal = code, signal
	as.event(t.Name, tev, nil)
	tr.markDead(false, newEvent(api.TaskKilled, "Task successfully killed", nil))
}

func parseSignal(s string) syscall.Signal {
	switch strings.TrimPrefix(strings.ToUpper(s), "SIG") {
	case "TERM":
		return syscall.SIGTERM
	case "KILL":
		return syscall.SIGKILL
	case "HUP":
		return syscall.SIGHUP
	case "QUIT":
		return syscall.SIGQUIT
	case "USR1":
		return syscall.SIGUSR1
	case "USR2":
		return syscall.SIGUSR2
	}
	return syscall.SIGINT
}

// command builds the process for the raw_exec (and exec) driver from
// config {command, args}.
func (tr *taskRunner) command(env map[string]string, interp func(string) string) (*exec.Cmd, error) {
	cfg := tr.task.Config
	c, _ := cfg["command"].(string)
	if c == "" {
		return nil, errors.New(`failed to validate task config: missing required attribute "command"`)
	}
	// The driver config is HCL2-evaluated, as in Nomad: an unknown
	// ${...} fails the task ("Unknown variable"), $${ escapes.
	var unknown []string
	interp = func(s string) string {
		out, bad := tr.interpolateConfig(s, env)
		unknown = append(unknown, bad...)
		return out
	}
	c = interp(c)
	var args []string
	switch v := cfg["args"].(type) {
	case nil:
	case []any:
		for _, x := range v {
			s, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("failed to validate task config: args must be strings, got %T", x)
			}
			args = append(args, interp(s))
		}
	default:
		return nil, fmt.Errorf("failed to validate task config: args must be a list of strings, got %T", v)
	}
	if len(unknown) > 0 {
		msg := fmt.Sprintf("%d errors occurred:\n\t* failed to parse config: \n", len(unknown)+1)
		for _, u := range unknown {
			msg += fmt.Sprintf("\t* Unknown variable: There is no variable named %q.\n", u)
		}
		return nil, errors.New(msg + "\n")
	}
	bin := c
	switch {
	case filepath.IsAbs(c):
	case strings.Contains(c, "/"):
		bin = filepath.Join(tr.dir, c)
	default:
		// Like Nomad's executor: the task's local/ and task dir first,
		// then PATH.
		found := ""
		for _, cand := range []string{filepath.Join(tr.dir, "local", c), filepath.Join(tr.dir, c)} {
			if fi, err := os.Stat(cand); err == nil && !fi.IsDir() {
				found = cand
				break
			}
		}
		if found == "" {
			p, err := exec.LookPath(c)
			if err != nil {
				return nil, fmt.Errorf("failed to launch command with executor: %v", err)
			}
			found = p
		}
		bin = found
	}
	cmd := &exec.Cmd{Path: bin, Args: append([]string{c}, args...), Dir: tr.dir,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd, nil
}

var envKeyRe = regexp.MustCompile(`[^A-Za-z0-9_]`)

func envKey(s string) string { return envKeyRe.ReplaceAllString(s, "_") }

// buildEnv is the task environment: the agent's environment (without
// NOMAD_* variables), Nomad's task variables, then the task's env stanza.
func (tr *taskRunner) buildEnv() map[string]string {
	as, t := tr.as, tr.task
	a := as.a
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && !strings.HasPrefix(k, "NOMAD_") {
			env[k] = v
		}
	}
	al, j := as.alloc, as.job
	set := func(k, v string) { env[k] = v }
	set("NOMAD_ALLOC_DIR", filepath.Join(as.dir, "alloc"))
	set("NOMAD_TASK_DIR", filepath.Join(tr.dir, "local"))
	set("NOMAD_SECRETS_DIR", filepath.Join(tr.dir, "secrets"))
	set("NOMAD_ALLOC_ID", al.ID)
	set("NOMAD_SHORT_ALLOC_ID", al.ID[:8])
	set("NOMAD_ALLOC_NAME", al.Name)
	set("NOMAD_ALLOC_INDEX", strconv.Itoa(as.index))
	set("NOMAD_TASK_NAME", t.Name)
	set("NOMAD_GROUP_NAME", al.TaskGroup)
	set("NOMAD_JOB_ID", *j.ID)
	set("NOMAD_JOB_NAME", *j.Name)
	if *j.ParentID != "" {
		set("NOMAD_JOB_PARENT_ID", *j.ParentID)
	}
	set("NOMAD_DC", a.cfg.Datacenter)
	set("NOMAD_NAMESPACE", al.Namespace)
	set("NOMAD_REGION", a.cfg.Region)
	set("NOMAD_CPU_LIMIT", strconv.Itoa(*t.Resources.CPU))
	set("NOMAD_MEMORY_LIMIT", strconv.Itoa(*t.Resources.MemoryMB))
	if t.Resources.MemoryMaxMB != nil && *t.Resources.MemoryMaxMB > 0 {
		set("NOMAD_MEMORY_MAX_LIMIT", strconv.Itoa(*t.Resources.MemoryMaxMB))
	}
	meta := map[string]string{}
	for _, m := range []map[string]string{j.Meta, as.group.Meta, t.Meta} {
		for k, v := range m {
			meta[k] = v
		}
	}
	for k, v := range meta {
		set("NOMAD_META_"+envKey(k), v)
		// Nomad's own name keeps the key's dots: NOMAD_META_gofl.cluster_id.
		set("NOMAD_META_"+strings.ReplaceAll(k, "-", "_"), v)
		set("NOMAD_META_"+strings.ToUpper(envKey(k)), v)
	}
	ports := append([]api.PortMapping{}, as.ports...)
	for _, p := range ports {
		l := envKey(p.Label)
		port := p.Value
		if p.To > 0 {
			port = p.To
		}
		addr := fmt.Sprintf("%s:%d", p.HostIP, p.Value)
		set("NOMAD_PORT_"+l, strconv.Itoa(port))
		set("NOMAD_HOST_PORT_"+l, strconv.Itoa(p.Value))
		set("NOMAD_IP_"+l, p.HostIP)
		set("NOMAD_HOST_IP_"+l, p.HostIP)
		set("NOMAD_ADDR_"+l, addr)
		set("NOMAD_HOST_ADDR_"+l, addr)
		// No NOMAD_ALLOC_IP_/ADDR_ for host ports (Nomad sets them only
		// with group networking).
		set("NOMAD_ALLOC_PORT_"+l, strconv.Itoa(port))
	}
	for k, v := range t.Env {
		env[k] = tr.interpolate(v, env)
	}
	return env
}

var interpRe = regexp.MustCompile(`\$\{([^}]+)\}`)

var hclIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// configRe also matches the $${ escape, which HCL2 turns into a literal ${.
var configRe = regexp.MustCompile(`\$?\$\{([^}]+)\}`)

// interpolateConfig interpolates a driver config string as Nomad's HCL2
// evaluation does: NOMAD_* and other task env variables, attr.*, node.*
// and meta.* resolve; $${x} is the literal ${x}; any other reference is
// returned in unknown (Nomad fails the task with "Unknown variable").
func (tr *taskRunner) interpolateConfig(s string, env map[string]string) (out string, unknown []string) {
	out = configRe.ReplaceAllStringFunc(s, func(m string) string {
		if strings.HasPrefix(m, "$$") {
			return m[1:]
		}
		key := m[2 : len(m)-1]
		if rest, ok := strings.CutPrefix(key, "meta."); ok && !hclIdent.MatchString(rest) {
			// meta.gofl.cluster-id is attribute access and a subtraction
			// to HCL2, not a meta key.
			unknown = append(unknown, key)
			return m
		}
		v := tr.interpolate(m, env)
		if v == m {
			unknown = append(unknown, m[2:len(m)-1])
		}
		return v
	})
	return out, unknown
}

// interpolate replaces ${NOMAD_*}/${env var}, ${attr.*}, ${node.*} and
// ${meta.*}; unknown references are left as they are (as Nomad does).
func (tr *taskRunner) interpolate(s string, env map[string]string) string {
	return interpRe.ReplaceAllStringFunc(s, func(m string) string {
		key := m[2 : len(m)-1]
		if strings.HasPrefix(key, "attr.") || strings.HasPrefix(key, "node.") || strings.HasPrefix(key, "meta.") {
			tr.as.a.mu.Lock()
			v, ok := tr.as.a.resolveTarget(m)
			tr.as.a.mu.Unlock()
			if ok {
				return v
			}
			return m
		}
		key = strings.TrimPrefix(key, "env.")
		if v, ok := env[key]; ok {
			return v
		}
		return m
	})
}
