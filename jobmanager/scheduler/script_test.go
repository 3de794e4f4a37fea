package scheduler

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/internal/scripttest"
	"github.com/gofl/gofl/jobgraph"
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/jobmanager/failover"
)

// TestScripts runs the scenarios in testdata/*.txt. A script is a list of
// commands; the lines starting with "> " after a command are exactly the
// actions (and outputs) that command must produce. Commands:
//
//	config key=value ...            scheduler options (before start)
//	vertex ID PARALLELISM [ssg=G] [colo=C]
//	edge SRC DST all|pointwise pipelined|blocking
//	batch                           mark the job BATCH (default STREAMING)
//	start                           StartScheduling
//	offer TM N                      TM offers N new slots (TM/0, TM/1, ...)
//	run|init|finish VERTEX[#SUB]    report the current attempts' state
//	fail VERTEX#SUB [recoverable|nonrecoverable|environment|missing=V#S]
//	canceled VERTEX[#SUB]           report CANCELED
//	report ID STATE                 raw report for an attempt ID "v#s.a"
//	lost TM [fenced=DUR]            TaskManager lost; its attempts restart no earlier than DUR from now
//	ack VERTEX[#SUB]                the TaskManager acknowledged the deployment
//	deploy-failed VERTEX#SUB        submitting the current attempt failed
//	deploy-unanswered VERTEX#SUB    submitting it got no answer: it may run
//	tm-report TM [at=D] [running=A,...] [partitions=A,...]
//	                                a TaskManager's heartbeat answer, asked
//	                                for at logical time D (default now): the
//	                                attempts it runs and the partitions of the
//	                                attempts it holds (A: "v#s.a", or "v#s"
//	                                for the current attempt)
//	partitions-lost TM A,...        the TaskManager lost those attempts' partitions
//	not-enough N                    ResourceManager: only N slots
//	alloc-failed                    ResourceManager gave up starting workers
//	consumable VERTEX#SUB           a pipelined partition has data
//	tick DURATION                   advance logical time
//	cancel                          cancel the job
//	global-fail                     a global failure
//	states                          print every execution as v#s.attempt:STATE
//	history                         print the exception history
func TestScripts(t *testing.T) {
	scripttest.Run(t, "testdata/*.txt", newScript)
}

type script struct {
	t        *testing.T
	cfg      Config
	jg       *jobgraph.JobGraph
	s        *Scheduler
	now      time.Duration
	nextSlot map[string]int
}

// newScript is a fresh interpreter for one script.
func newScript(t *testing.T) func(string) []string {
	sc := &script{t: t, cfg: DefaultConfig(), jg: &jobgraph.JobGraph{JobID: "job", Name: "test", Type: jobgraph.Streaming}, nextSlot: map[string]int{}}
	sc.cfg.Restart.Type = failover.RestartTypeNone
	sc.cfg.StrictTransitions = true
	return sc.exec
}

func (sc *script) fatalf(format string, args ...any) {
	sc.t.Helper()
	sc.t.Fatalf(format, args...)
}

func (sc *script) exec(cmd string) []string {
	f := strings.Fields(cmd)
	switch f[0] {
	case "config":
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			sc.setConfig(k, v)
		}
		return nil
	case "batch":
		sc.jg.Type = jobgraph.Batch
		return nil
	case "vertex":
		p, _ := strconv.Atoi(f[2])
		v := &jobgraph.Vertex{ID: jobgraph.VertexID(f[1]), Name: f[1], Parallelism: p, Invokable: "noop", SlotSharingGroup: "default"}
		for _, opt := range f[3:] {
			k, val, _ := strings.Cut(opt, "=")
			switch k {
			case "ssg":
				v.SlotSharingGroup = val
				if val == "none" {
					v.SlotSharingGroup = ""
				}
			case "colo":
				v.CoLocationGroup = val
			}
		}
		sc.jg.Vertices = append(sc.jg.Vertices, v)
		return nil
	case "edge":
		e := &jobgraph.Edge{Source: jobgraph.VertexID(f[1]), Target: jobgraph.VertexID(f[2]), Result: jobgraph.ResultID(f[1] + ">" + f[2]),
			Distribution: jobgraph.AllToAll, PartitionType: jobgraph.Pipelined}
		if f[3] == "pointwise" {
			e.Distribution = jobgraph.Pointwise
		}
		if f[4] == "blocking" {
			e.PartitionType = jobgraph.Blocking
		}
		sc.jg.Edges = append(sc.jg.Edges, e)
		return nil
	case "start":
		if sc.s == nil {
			s, err := New(sc.cfg, sc.jg, 1)
			if err != nil {
				return []string{"error: " + err.Error()}
			}
			sc.s = s
		}
		return sc.step(StartScheduling{})
	case "offer":
		n, _ := strconv.Atoi(f[2])
		tm := eg.TaskManagerLocation{ID: f[1], Host: "localhost", DataAddress: f[1] + ":1"}
		ev := SlotsOffered{TaskManager: tm}
		for i := 0; i < n; i++ {
			ev.Slots = append(ev.Slots, SlotOffer{Allocation: eg.AllocationID(fmt.Sprintf("%s/%d", f[1], sc.nextSlot[f[1]])), SlotIndex: i})
			sc.nextSlot[f[1]]++
		}
		return sc.step(ev)
	case "run", "init", "finish", "canceled":
		state := map[string]eg.ExecutionState{"run": eg.Running, "init": eg.Initializing, "finish": eg.Finished, "canceled": eg.Canceled}[f[0]]
		var out []string
		for _, v := range sc.vertices(f[1]) {
			out = append(out, sc.step(TaskStateChanged{Attempt: sc.s.g.AttemptID(v), State: state})...)
		}
		return out
	case "fail":
		v := sc.vertices(f[1])[0]
		cause := errors.New("boom")
		if len(f) > 2 {
			switch kind, arg, _ := strings.Cut(f[2], "="); kind {
			case "nonrecoverable":
				cause = failover.NonRecoverable(cause)
			case "environment":
				cause = failover.EnvironmentError(cause)
			case "missing":
				p := sc.s.g.JobVertexOf(sc.vertices(arg)[0]).Produced[0]
				pi := p.FirstPartition + eg.PartitionIndex(sc.s.g.Vertices[sc.vertices(arg)[0]].Subtask)
				cause = &failover.PartitionNotFoundError{ResultPartitionID: sc.s.g.PartitionID(pi).String()}
			}
		}
		return sc.step(TaskStateChanged{Attempt: sc.s.g.AttemptID(v), State: eg.Failed, Cause: cause})
	case "report":
		id := sc.parseAttempt(f[1])
		st, err := eg.ParseExecutionState(f[2])
		if err != nil {
			sc.fatalf("%v", err)
		}
		return sc.step(TaskStateChanged{Attempt: id, State: st, Cause: errors.New("reported")})
	case "lost":
		ev := TaskManagerLost{TaskManagerID: f[1], Cause: errors.New("heartbeat timeout")}
		if len(f) > 2 {
			d, err := time.ParseDuration(strings.TrimPrefix(f[2], "fenced="))
			if err != nil {
				return []string{"error: " + err.Error()}
			}
			ev.FencedAt = sc.now + d
		}
		return sc.step(ev)
	case "ack":
		var out []string
		for _, v := range sc.vertices(f[1]) {
			out = append(out, sc.step(DeploymentAcknowledged{Attempt: sc.s.g.AttemptID(v)})...)
		}
		return out
	case "deploy-failed":
		return sc.step(DeploymentFailed{Attempt: sc.attempt(f[1]), Cause: errors.New("no answer in time")})
	case "deploy-unanswered":
		return sc.step(DeploymentFailed{Attempt: sc.attempt(f[1]), Cause: errors.New("no answer in time"), OutcomeUnknown: true})
	case "tm-report":
		r := TaskManagerReport{TaskManagerID: f[1], RequestedAt: sc.now}
		for _, opt := range f[2:] {
			k, v, _ := strings.Cut(opt, "=")
			switch k {
			case "at":
				d, err := time.ParseDuration(v)
				if err != nil {
					sc.fatalf("%v", err)
				}
				r.RequestedAt = d
			case "running":
				for _, a := range strings.Split(v, ",") {
					r.Running = append(r.Running, sc.attempt(a))
				}
			case "partitions":
				for _, a := range strings.Split(v, ",") {
					r.Partitions = append(r.Partitions, sc.partitions(sc.attempt(a))...)
				}
			default:
				sc.fatalf("tm-report: unknown option %q", opt)
			}
		}
		return sc.step(r)
	case "partitions-lost":
		ev := PartitionsLost{TaskManagerID: f[1], Cause: errors.New("job runner died")}
		for _, a := range strings.Split(f[2], ",") {
			ev.Partitions = append(ev.Partitions, sc.partitions(sc.attempt(a))...)
		}
		return sc.step(ev)
	case "alloc-failed":
		return sc.step(ResourceAllocationFailed{Cause: errors.New("TaskManagers failed to start 5 times")})
	case "not-enough":
		n, _ := strconv.Atoi(f[1])
		return sc.step(NotEnoughResources{Acquired: n})
	case "consumable":
		v := sc.vertices(f[1])[0]
		p := sc.s.g.JobVertexOf(v).Produced[0]
		return sc.step(PartitionConsumable{Partition: sc.s.g.PartitionID(p.FirstPartition + eg.PartitionIndex(sc.s.g.Vertices[v].Subtask))})
	case "tick":
		d, err := time.ParseDuration(f[1])
		if err != nil {
			sc.fatalf("%v", err)
		}
		sc.now += d
		return sc.step(Tick{})
	case "cancel":
		return sc.step(CancelJob{})
	case "global-fail":
		return sc.step(FailJob{Cause: errors.New("global")})
	case "states":
		return sc.states()
	case "history":
		var out []string
		for _, h := range sc.s.ExceptionHistory() {
			out = append(out, fmt.Sprintf("%v %s %q %s restarted=%d: %v", h.Time, h.Type, h.TaskName, h.Location, h.Restarted, h.Cause))
		}
		return out
	}
	sc.fatalf("unknown command %q", cmd)
	return nil
}

func (sc *script) setConfig(k, v string) {
	d := func() time.Duration {
		x, err := time.ParseDuration(v)
		if err != nil {
			sc.fatalf("%s: %v", k, err)
		}
		return x
	}
	n := func() int { x, _ := strconv.Atoi(v); return x }
	switch k {
	case "strategy":
		sc.cfg.Strategy = v
	case "allocator":
		sc.cfg.Allocator = v
	case "failover":
		sc.cfg.Failover = v
	case "evenly":
		sc.cfg.EvenlySpreadOut = v == "true"
	case "local-recovery":
		sc.cfg.LocalRecovery = v == "true"
	case "slot-timeout":
		sc.cfg.SlotRequestTimeout = d()
	case "idle-timeout":
		sc.cfg.SlotIdleTimeout = d()
	case "restart":
		sc.cfg.Restart.Type = v
	case "attempts":
		sc.cfg.Restart.FixedDelayAttempts = n()
	case "delay":
		sc.cfg.Restart.FixedDelay = d()
	case "max-failures":
		sc.cfg.Restart.FailureRateMaxFailuresPerInterval = n()
	case "interval":
		sc.cfg.Restart.FailureRateInterval = d()
	case "rate-delay":
		sc.cfg.Restart.FailureRateDelay = d()
	case "initial-backoff":
		sc.cfg.Restart.ExponentialDelayInitialBackoff = d()
	case "max-backoff":
		sc.cfg.Restart.ExponentialDelayMaxBackoff = d()
	case "multiplier":
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			sc.fatalf("%s: %v", k, err)
		}
		sc.cfg.Restart.ExponentialDelayBackoffMultiplier = x
	case "jitter":
		x, _ := strconv.ParseFloat(v, 64)
		sc.cfg.Restart.ExponentialDelayJitterFactor = x
	case "offload":
		sc.cfg.OffloadMinSize = n()
	case "grace":
		sc.cfg.MissingTaskGrace = d()
	default:
		sc.fatalf("unknown config key %q", k)
	}
}

// vertices resolves "a" (all subtasks) or "a#1".
func (sc *script) vertices(spec string) []eg.VertexIndex {
	id, sub, hasSub := strings.Cut(spec, "#")
	jv := sc.s.g.JobVertex(jobgraph.VertexID(id))
	if jv == nil {
		sc.fatalf("unknown vertex %q", id)
	}
	if hasSub {
		n, _ := strconv.Atoi(sub)
		return []eg.VertexIndex{jv.VertexAt(n)}
	}
	var vs []eg.VertexIndex
	for i := 0; i < jv.Parallelism; i++ {
		vs = append(vs, jv.VertexAt(i))
	}
	return vs
}

func (sc *script) parseAttempt(s string) eg.ExecutionAttemptID {
	vs, att, _ := strings.Cut(s, ".")
	v := sc.vertices(vs)[0]
	a, _ := strconv.Atoi(att)
	id := sc.s.g.AttemptID(v)
	id.Attempt = int32(a)
	return id
}

// attempt resolves "v#s.a", or "v#s" for the current attempt.
func (sc *script) attempt(spec string) eg.ExecutionAttemptID {
	if strings.Contains(spec, ".") {
		return sc.parseAttempt(spec)
	}
	return sc.s.g.AttemptID(sc.vertices(spec)[0])
}

// partitions are the IDs of the partitions attempt id produces, one per
// produced result.
func (sc *script) partitions(id eg.ExecutionAttemptID) []eg.ResultPartitionID {
	var out []eg.ResultPartitionID
	for _, r := range sc.s.g.JobVertex(id.JobVertex).Produced {
		out = append(out, eg.ResultPartitionID{Result: r.ID, Partition: id.Subtask, Producer: id})
	}
	return out
}

func (sc *script) step(ev Event) []string {
	var out []string
	if err := sc.s.Step(sc.now, ev); err != nil {
		out = append(out, "error: "+err.Error())
	}
	return append(out, formatReady(sc.s.Ready())...)
}

func short(id eg.ExecutionAttemptID) string {
	return fmt.Sprintf("%s#%d.%d", id.JobVertex, id.Subtask, id.Attempt)
}

func formatReady(r Ready) []string {
	var out []string
	for _, c := range r.JobStatus {
		line := fmt.Sprintf("status %s -> %s", c.From, c.To)
		if c.Cause != nil {
			line += ": " + c.Cause.Error()
		}
		out = append(out, line)
	}
	for _, rep := range r.SlotOfferReplies {
		out = append(out, fmt.Sprintf("offer-reply %s accepted=%v rejected=%v", rep.TaskManagerID, rep.Accepted, rep.Rejected))
	}
	for _, b := range r.OffloadedBlobs {
		out = append(out, fmt.Sprintf("offload %d bytes", len(b.Data)))
	}
	for _, d := range r.Deployments {
		tdd := d.Descriptor
		line := fmt.Sprintf("deploy %s#%d.%d on %s slot %s", tdd.Attempt.JobVertexId, tdd.Attempt.SubtaskIndex, tdd.Attempt.AttemptNumber, d.TaskManager.ID, tdd.AllocationId)
		for _, g := range tdd.InputGates {
			var from []string
			if l := g.GetInline(); l != nil {
				for _, sd := range l.Descriptors {
					from = append(from, fmt.Sprintf("%s#%d.%d@%s", sd.Producer.JobVertexId, sd.Producer.SubtaskIndex, sd.Producer.AttemptNumber, sd.ProducerTaskManagerId))
				}
			} else {
				from = []string{"blob"}
			}
			line += fmt.Sprintf(" in(%s sub%d: %s)", g.ResultId, g.ConsumedSubpartitionIndex, strings.Join(from, " "))
		}
		out = append(out, line)
	}
	for _, c := range r.Cancellations {
		out = append(out, fmt.Sprintf("cancel %s on %s", short(c.Attempt), c.TaskManager.ID))
	}
	for _, pr := range r.PartitionReleases {
		var ps []string
		for _, p := range pr.Partitions {
			ps = append(ps, fmt.Sprintf("%s[%d]", p.Result, p.Partition))
		}
		out = append(out, fmt.Sprintf("release-partitions %s %s", pr.TaskManagerID, strings.Join(ps, " ")))
	}
	for _, sr := range r.SlotReleases {
		out = append(out, fmt.Sprintf("release-slot %s (%s)", sr.Allocation, sr.Cause))
	}
	if r.ResourceRequirements != nil {
		out = append(out, fmt.Sprintf("require %d slots", *r.ResourceRequirements))
	}
	return out
}

func (sc *script) states() []string {
	var out []string
	g := sc.s.g
	for _, jv := range g.JobVertices {
		var parts []string
		for i := 0; i < jv.Parallelism; i++ {
			ex := g.Vertices[jv.VertexAt(i)].Current
			p := fmt.Sprintf("%d.%d:%s", i, ex.Attempt, ex.State)
			if ex.Allocation != "" && !ex.State.IsTerminal() {
				p += "@" + string(ex.Allocation)
			}
			parts = append(parts, p)
		}
		out = append(out, fmt.Sprintf("%s: %s", jv.ID(), strings.Join(parts, " ")))
	}
	sort.SliceStable(out, func(i, j int) bool { return false })
	return append(out, fmt.Sprintf("job %s", sc.s.Status()))
}
