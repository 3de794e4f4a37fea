package checkpoint

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/internal/scripttest"
	"github.com/gofl/gofl/jobgraph"
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/rpc/pb"
)

// TestScripts runs the scenarios in testdata/*.txt; the lines starting
// with "> " after a command are exactly what it must produce. Commands:
//
//	config key=value ...       interval, timeout, min-pause, max-concurrent,
//	                           tolerable, retained, retention, savepoints-dir
//	vertex ID P [ops=o1,o2]    a vertex (operators default to ID-op)
//	edge SRC DST all|pointwise
//	restored ID [shared=a,b]   the job restores checkpoint ID
//	start                      build the coordinator (first Step at now)
//	run|finish|fail V[#S]      the current attempts' new state
//	restart V[#S]              a new attempt (CREATED)
//	tick DUR                   advance logical time and Tick
//	ack V#S[.A] ID [size=N] [file=F] [shared=a,b]
//	                           shared: files of <ck>/<job>/shared
//	decline V#S ID
//	savepoint REQ [dir=D] [type=suspend|terminate]
//	written ID [err=MSG]       outcome of a metadata write
//	eod V[#S]                  the subtasks ended their data (EndOfData)
//	failover
//	end finished|canceled|failed
//	stats                      print the statistics
//	retained                   print the retained checkpoints
//	restore V#S                print the TaskRestore of that subtask
func TestScripts(t *testing.T) {
	scripttest.Run(t, "testdata/*.txt", newScript)
}

type script struct {
	t        *testing.T
	cfg      Config
	jg       *jobgraph.JobGraph
	c        *Coordinator
	restored *Restored
	now      time.Duration
	tasks    map[string]Task // "v#s"
	wake     string
}

// newScript is a fresh interpreter for one script.
func newScript(t *testing.T) func(string) []string {
	sc := &script{t: t, cfg: DefaultConfig(), jg: &jobgraph.JobGraph{JobID: "job0123456789", Name: "test", Type: jobgraph.Streaming},
		tasks: map[string]Task{}}
	sc.cfg.CheckpointsDir = "file:///ck"
	sc.cfg.StartTime = time.UnixMilli(1_000_000)
	return sc.exec
}

func (sc *script) exec(cmd string) []string {
	f := strings.Fields(cmd)
	opts := map[string]string{}
	for _, a := range f[1:] {
		if k, v, ok := strings.Cut(a, "="); ok {
			opts[k] = v
		}
	}
	switch f[0] {
	case "config":
		for k, v := range opts {
			sc.setConfig(k, v)
		}
		return nil
	case "vertex":
		p, _ := strconv.Atoi(f[2])
		v := &jobgraph.Vertex{ID: jobgraph.VertexID(f[1]), Name: f[1], Parallelism: p, MaxParallelism: 8}
		ops := []string{f[1] + "-op"}
		if o, ok := opts["ops"]; ok {
			ops = strings.Split(o, ",")
		}
		for _, o := range ops {
			v.Operators = append(v.Operators, jobgraph.Operator{ID: o})
		}
		sc.jg.Vertices = append(sc.jg.Vertices, v)
		for i := 0; i < p; i++ {
			sc.tasks[fmt.Sprintf("%s#%d", f[1], i)] = Task{Attempt: eg.ExecutionAttemptID{JobVertex: v.ID, Subtask: int32(i)}, State: eg.Created}
		}
		return nil
	case "edge":
		d := jobgraph.AllToAll
		if f[3] == "pointwise" {
			d = jobgraph.Pointwise
		}
		sc.jg.Edges = append(sc.jg.Edges, &jobgraph.Edge{Source: jobgraph.VertexID(f[1]), Target: jobgraph.VertexID(f[2]), Distribution: d})
		return nil
	case "restored":
		id, _ := strconv.ParseInt(f[1], 10, 64)
		md := &pb.CheckpointMetadata{Version: 1, CheckpointId: id}
		for _, v := range sc.jg.Vertices {
			for _, op := range v.Operators {
				st := &pb.OperatorState{OperatorId: op.ID, Parallelism: int32(v.Parallelism), MaxParallelism: 8}
				for i := 0; i < v.Parallelism; i++ {
					st.Subtasks = append(st.Subtasks, &pb.OperatorSubtaskStateHandle{OperatorId: op.ID, SubtaskIndex: int32(i),
						Parallelism: int32(v.Parallelism), MaxParallelism: 8, File: &pb.StateFile{Path: fmt.Sprintf("%s-%d", op.ID, i)},
						SharedFiles: sc.sharedFiles(opts["shared"])})
				}
				md.Operators = append(md.Operators, st)
			}
		}
		sc.restored = &Restored{ID: id, Location: "file:///sp/savepoint-x", Metadata: md, Savepoint: true}
		return nil
	case "start":
		c, err := New(sc.cfg, sc.jg, sc.restored)
		if err != nil {
			return []string{"error: " + err.Error()}
		}
		sc.c = c
		return sc.step(Tick{})
	case "run", "finish", "fail", "restart":
		st := map[string]eg.ExecutionState{"run": eg.Running, "finish": eg.Finished, "fail": eg.Failed, "restart": eg.Created}[f[0]]
		for _, key := range sc.match(f[1]) {
			t := sc.tasks[key]
			if f[0] == "restart" {
				t.Attempt.Attempt++
			}
			t.State = st
			sc.tasks[key] = t
		}
		return sc.step(TasksChanged{Tasks: sc.taskList()})
	case "tick":
		d, err := time.ParseDuration(f[1])
		if err != nil {
			sc.t.Fatalf("tick: %v", err)
		}
		sc.now += d
		return sc.step(Tick{})
	case "ack":
		id, _ := strconv.ParseInt(f[2], 10, 64)
		a := sc.attempt(f[1])
		size, _ := strconv.ParseInt(opts["size"], 10, 64)
		file := opts["file"]
		if file == "" {
			file = fmt.Sprintf("%s-%d-%d", a.JobVertex, a.Subtask, a.Attempt)
		}
		var hs []*pb.OperatorSubtaskStateHandle
		for _, op := range sc.jg.Vertex(a.JobVertex).Operators {
			hs = append(hs, &pb.OperatorSubtaskStateHandle{OperatorId: op.ID, SubtaskIndex: a.Subtask, File: &pb.StateFile{Path: file, Size: size},
				SharedFiles: sc.sharedFiles(opts["shared"])})
		}
		return sc.step(Acknowledge{Attempt: a, ID: id, Operators: hs, Metrics: &pb.CheckpointMetrics{StateSize: size, CheckpointedSize: size}})
	case "decline":
		id, _ := strconv.ParseInt(f[2], 10, 64)
		return sc.step(Decline{Attempt: sc.attempt(f[1]), ID: id, Reason: errors.New("snapshot failed")})
	case "savepoint":
		typ := pb.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT
		switch opts["type"] {
		case "suspend":
			typ = pb.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT_SUSPEND
		case "terminate":
			typ = pb.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT_TERMINATE
		}
		return sc.step(TriggerSavepoint{RequestID: f[1], Dir: opts["dir"], Type: typ})
	case "written":
		id, _ := strconv.ParseInt(f[1], 10, 64)
		var err error
		if m, ok := opts["err"]; ok {
			err = errors.New(m)
		}
		return sc.step(MetadataWritten{ID: id, Err: err})
	case "eod":
		var out []string
		for _, key := range sc.match(f[1]) {
			out = append(out, sc.step(EndOfData{Attempt: sc.tasks[key].Attempt})...)
		}
		return out
	case "failover":
		return sc.step(Failover{Cause: errors.New("task failed")})
	case "end":
		st := map[string]JobEndStatus{"finished": JobFinished, "canceled": JobCanceled, "failed": JobFailed}[f[1]]
		return sc.step(JobEnded{Status: st})
	case "stats":
		s := sc.c.Stats()
		out := []string{fmt.Sprintf("counts total=%d in_progress=%d completed=%d failed=%d restored=%d", s.Total, s.InProgress, s.Completed, s.Failed, s.Restored)}
		for _, h := range s.History {
			line := fmt.Sprintf("history %d %s savepoint=%v acked=%d/%d size=%d duration=%d discarded=%v", h.ID, h.Status, h.Savepoint,
				h.NumAcknowledged, h.NumSubtasks, h.StateSize, h.EndToEndDuration, h.Discarded)
			if h.FailureMessage != "" {
				line += " failure=" + h.FailureMessage
			}
			out = append(out, line)
		}
		return out
	case "retained":
		var ids []string
		for _, c := range sc.c.Retained() {
			ids = append(ids, strconv.FormatInt(c.ID, 10))
		}
		l := "none"
		if sc.c.Latest() != nil {
			l = strconv.FormatInt(sc.c.Latest().ID, 10)
		}
		return []string{fmt.Sprintf("retained [%s] latest %s", strings.Join(ids, " "), l)}
	case "restore":
		a := sc.attempt(f[1])
		tr := sc.c.TaskRestore(sc.jg.Vertex(a.JobVertex), int(a.Subtask))
		if tr == nil {
			return []string{"no restore"}
		}
		var hs []string
		for _, h := range tr.Operators {
			hs = append(hs, fmt.Sprintf("%s/%d", h.OperatorId, h.SubtaskIndex))
		}
		return []string{fmt.Sprintf("restore %d from %s: %s", tr.CheckpointId, tr.Location, strings.Join(hs, " "))}
	}
	sc.t.Fatalf("unknown command %q", cmd)
	return nil
}

// sharedFiles are the shared files named in list ("a,b"), under the job's
// shared directory unless a name is a URI.
func (sc *script) sharedFiles(list string) []*pb.StateFile {
	var out []*pb.StateFile
	for _, n := range strings.Split(list, ",") {
		if n == "" {
			continue
		}
		if !strings.Contains(n, "://") {
			n = SharedLocation(sc.cfg.CheckpointsDir, sc.jg.JobID) + "/" + n
		}
		out = append(out, &pb.StateFile{Path: n, Size: 1})
	}
	return out
}

func (sc *script) setConfig(k, v string) {
	d := func() time.Duration {
		x, err := time.ParseDuration(v)
		if err != nil {
			sc.t.Fatalf("config %s: %v", k, err)
		}
		return x
	}
	n := func() int { x, _ := strconv.Atoi(v); return x }
	switch k {
	case "interval":
		sc.cfg.Interval = d()
	case "timeout":
		sc.cfg.Timeout = d()
	case "min-pause":
		sc.cfg.MinPause = d()
	case "max-concurrent":
		sc.cfg.MaxConcurrent = n()
	case "tolerable":
		sc.cfg.TolerableFailures = n()
	case "retained":
		sc.cfg.NumRetained = n()
	case "retention":
		sc.cfg.Retention = map[string]string{"none": conf.NoExternalizedCheckpoints, "delete": conf.DeleteOnCancellation, "retain": conf.RetainOnCancellation}[v]
	case "savepoints-dir":
		sc.cfg.SavepointsDir = v
	default:
		sc.t.Fatalf("unknown config %s", k)
	}
}

func (sc *script) match(sel string) []string {
	if strings.Contains(sel, "#") {
		if _, ok := sc.tasks[sel]; !ok {
			sc.t.Fatalf("no task %s", sel)
		}
		return []string{sel}
	}
	var out []string
	for k := range sc.tasks {
		if strings.HasPrefix(k, sel+"#") {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// attempt parses "v#s" (the current attempt) or "v#s.a".
func (sc *script) attempt(s string) eg.ExecutionAttemptID {
	key, att, hasAtt := strings.Cut(s, ".")
	t, ok := sc.tasks[key]
	if !ok {
		sc.t.Fatalf("no task %s", key)
	}
	a := t.Attempt
	if hasAtt {
		n, _ := strconv.Atoi(att)
		a.Attempt = int32(n)
	}
	return a
}

func (sc *script) taskList() []Task {
	var out []Task
	for _, t := range sc.tasks {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return compareAttempts(out[i].Attempt, out[j].Attempt) < 0 })
	return out
}

func attemptString(a eg.ExecutionAttemptID) string {
	return fmt.Sprintf("%s#%d.%d", a.JobVertex, a.Subtask, a.Attempt)
}

func attemptsString(as []eg.ExecutionAttemptID) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = attemptString(a)
	}
	return "[" + strings.Join(s, " ") + "]"
}

func (sc *script) step(ev Event) []string {
	if sc.c == nil {
		return nil
	}
	var out []string
	if err := sc.c.Step(sc.now, ev); err != nil {
		out = append(out, "error: "+err.Error())
	}
	r := sc.c.Ready()
	for _, t := range r.Triggers {
		o := t.Options
		out = append(out, fmt.Sprintf("trigger %d ts=%d %s exactly-once=%v loc=%s at=%s", t.ID, t.TimestampMs,
			strings.TrimPrefix(o.Type.String(), "CHECKPOINT_TYPE_"), o.ExactlyOnce, o.TargetLocation, attemptsString(t.Attempts)))
	}
	for _, w := range r.WriteMetadata {
		var ops []string
		for _, op := range w.Metadata.Operators {
			var subs []string
			for _, h := range op.Subtasks {
				s := strconv.Itoa(int(h.SubtaskIndex))
				if h.Finished {
					s += "(finished)"
				} else if h.File != nil {
					s += ":" + h.File.Path
				}
				subs = append(subs, s)
			}
			ops = append(ops, op.OperatorId+"{"+strings.Join(subs, ",")+"}")
		}
		out = append(out, fmt.Sprintf("write-metadata %d loc=%s v%d %s", w.ID, w.Location, w.Metadata.Version, strings.Join(ops, " ")))
	}
	for _, n := range r.Notifications {
		kind := "abort"
		if n.Complete {
			kind = fmt.Sprintf("complete (last %d)", n.LastCompleted)
		}
		out = append(out, fmt.Sprintf("notify %s %d %s", kind, n.ID, attemptsString(n.Attempts)))
	}
	for _, d := range r.Discards {
		line := "discard " + d.Location
		if d.Location == "" {
			line = "discard"
		}
		if len(d.Files) > 0 {
			line += fmt.Sprintf(" files=%v", d.Files)
		}
		if len(d.SharedFiles) > 0 {
			var names []string
			for _, u := range d.SharedFiles {
				names = append(names, strings.TrimPrefix(u, SharedLocation(sc.cfg.CheckpointsDir, sc.jg.JobID)+"/"))
			}
			line += fmt.Sprintf(" shared=%v", names)
		}
		out = append(out, line)
	}
	for _, s := range r.Savepoints {
		if s.Err != nil {
			out = append(out, fmt.Sprintf("savepoint %s failed: %v", s.RequestID, s.Err))
		} else {
			out = append(out, fmt.Sprintf("savepoint %s done %d at %s", s.RequestID, s.ID, s.Location))
		}
	}
	if r.FailJob != nil {
		out = append(out, "fail-job: "+r.FailJob.Error())
	}
	w := "none"
	if r.HasWakeAt {
		w = r.WakeAt.String()
	}
	if w != sc.wake {
		out = append(out, "wake "+w)
		sc.wake = w
	}
	return out
}
