package scheduler_test

// Benchmarks mirroring Flink's scheduler benchmark suite
// (flink-runtime/.../scheduler/benchmark): the two-vertex source → sink
// ALL_TO_ALL job of mock.TwoVertexJob, STREAMING with a PIPELINED edge or
// BATCH with a BLOCKING one, at parallelism 4000 (Flink's setting) and
// 10000 per vertex.
//
// Setup runs with the timer stopped; each benchmark times only the step
// Flink's counterpart times, driven through Scheduler.Step as the JobMaster
// would, and checks its outcome so it cannot silently measure nothing.
//
// This file is an external test (package scheduler_test) because it uses
// the mock fixtures, which import the scheduler. The failover strategy is
// therefore measured through Step(TaskStateChanged FAILED): the timed work
// is failure classification, TasksNeedingRestart, and the cancellation of
// every task it returns (one Cancellation each). That is an upper bound of
// the cost of TasksNeedingRestart alone, which is what Flink times.
//
// Run: go test -run '^$' -bench . -benchmem -benchtime 3x ./jobmanager/scheduler/

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/gofl/gofl/jobgraph"
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/jobmanager/failover"
	"github.com/gofl/gofl/jobmanager/scheduler"
	"github.com/gofl/gofl/jobmanager/scheduler/mock"
)

// benchParallelisms are the parallelisms of each of the two vertices.
var benchParallelisms = []int{4000, 10000}

// benchSlotsPerTM is the number of slots each mock TaskManager offers.
const benchSlotsPerTM = 10

type benchJob struct {
	name string
	job  func(parallelism int) *jobgraph.JobGraph
}

var benchJobs = []benchJob{{"streaming", mock.StreamingJob}, {"batch", mock.BatchJob}}

// forEachParallelism runs f as sub-benchmark "p<parallelism>" of b.
func forEachParallelism(b *testing.B, f func(b *testing.B, p int)) {
	for _, p := range benchParallelisms {
		b.Run(fmt.Sprintf("p%d", p), func(b *testing.B) { f(b, p) })
	}
}

// heapInUse forces a collection and returns the live heap.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

func reportPerSecond(b *testing.B, n int, unit string) {
	if sec := b.Elapsed().Seconds(); sec > 0 {
		b.ReportMetric(float64(n)*float64(b.N)/sec, unit)
	}
}

func reportMiB(b *testing.B, bytes int64, unit string) {
	b.ReportMetric(float64(bytes)/float64(b.N)/(1<<20), unit)
}

// started is a scheduler for jg with scheduling started and enough slots
// offered for its first region(s); it returns the Ready with their
// deployments.
func started(b *testing.B, cfg scheduler.Config, jg *jobgraph.JobGraph, p int) (*scheduler.Scheduler, scheduler.Ready) {
	b.Helper()
	s := mock.New(cfg, jg)
	mock.Drive(s, 0, scheduler.StartScheduling{})
	r := mock.Offer(s, 0, mock.TaskManagersFor(p, benchSlotsPerTM))
	return s, r
}

// batchSinksDeployed is a BATCH job with every source FINISHED and every
// sink DEPLOYING (Flink's setup for partition release and batch failover).
func batchSinksDeployed(b *testing.B, cfg scheduler.Config, p int) *scheduler.Scheduler {
	b.Helper()
	s, r := started(b, cfg, mock.BatchJob(p), p)
	if len(r.Deployments) != p {
		b.Fatalf("setup: %d sources deployed, want %d", len(r.Deployments), p)
	}
	r = mock.Report(s, 0, eg.Finished, mock.Attempts(s, mock.Source)...)
	if len(r.Deployments) != p {
		b.Fatalf("setup: %d sinks deployed, want %d", len(r.Deployments), p)
	}
	return s
}

// BenchmarkBuildExecutionGraph times building the ExecutionGraph of the job
// (Flink's BuildExecutionGraphBenchmark) and reports the heap the graph
// retains.
func BenchmarkBuildExecutionGraph(b *testing.B) {
	for _, job := range benchJobs {
		b.Run(job.name, func(b *testing.B) {
			forEachParallelism(b, func(b *testing.B, p int) {
				jg := job.job(p)
				wantRegions := 1
				if jg.Type == jobgraph.Batch {
					wantRegions = 2 * p
				}
				b.ReportAllocs()
				var retained int64
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					before := heapInUse()
					b.StartTimer()

					g, err := eg.Build(jg, uint64(i+1))

					b.StopTimer()
					if err != nil {
						b.Fatal(err)
					}
					retained += heapInUse() - before
					if len(g.Vertices) != 2*p || len(g.Partitions) != p || len(g.Groups) != 1 || len(g.Regions) != wantRegions {
						b.Fatalf("graph has %d vertices, %d partitions, %d groups, %d regions; want %d, %d, 1, %d",
							len(g.Vertices), len(g.Partitions), len(g.Groups), len(g.Regions), 2*p, p, wantRegions)
					}
					runtime.KeepAlive(g)
					b.StartTimer()
				}
				reportMiB(b, retained, "MiB-retained")
				reportPerSecond(b, 2*p, "tasks/s")
			})
		})
	}
}

// BenchmarkInitSchedulingStrategy times going from the JobGraph to
// scheduling started: scheduler.New (which builds the ExecutionGraph) and
// Step(StartScheduling), with no slots yet. Flink's
// InitSchedulingStrategyBenchmark times only the strategy's constructor;
// this includes graph building (the "build+init" target). It reports the
// heap the scheduler retains once scheduling has started.
func BenchmarkInitSchedulingStrategy(b *testing.B) {
	for _, job := range benchJobs {
		b.Run(job.name, func(b *testing.B) {
			forEachParallelism(b, func(b *testing.B, p int) {
				jg := job.job(p)
				cfg := mock.Config()
				b.ReportAllocs()
				var retained int64
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					before := heapInUse()
					b.StartTimer()

					s, err := scheduler.New(cfg, jg, uint64(i+1))
					if err != nil {
						b.Fatal(err)
					}
					r := mock.Drive(s, 0, scheduler.StartScheduling{})

					b.StopTimer()
					retained += heapInUse() - before
					// Slot sharing: source i and sink i share a slot, so
					// both shapes need p slots first.
					if r.ResourceRequirements == nil || *r.ResourceRequirements != p || s.Status() != scheduler.JobRunning {
						b.Fatalf("after StartScheduling: status %s, requirements %v; want RUNNING, %d", s.Status(), r.ResourceRequirements, p)
					}
					runtime.KeepAlive(s)
					b.StartTimer()
				}
				reportMiB(b, retained, "MiB-retained")
			})
		})
	}
}

// BenchmarkSchedulingDownstreamTasksInBatchJob times the FINISHED report of
// the last source of a BATCH job, which makes every sink region schedulable:
// the strategy schedules all sinks, their slots are allocated from the pool
// (freed by the sources) and their TDDs built (Flink's
// SchedulingDownstreamTasksInBatchJobBenchmark, plus allocation and
// deployment).
func BenchmarkSchedulingDownstreamTasksInBatchJob(b *testing.B) {
	forEachParallelism(b, func(b *testing.B, p int) {
		cfg := mock.Config()
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			s, r := started(b, cfg, mock.BatchJob(p), p)
			if len(r.Deployments) != p {
				b.Fatalf("setup: %d sources deployed, want %d", len(r.Deployments), p)
			}
			sources := mock.Attempts(s, mock.Source)
			if r := mock.Report(s, 0, eg.Finished, sources[:p-1]...); len(r.Deployments) != 0 {
				b.Fatalf("setup: %d sinks deployed before the last source finished", len(r.Deployments))
			}
			last := scheduler.TaskStateChanged{Attempt: sources[p-1], State: eg.Finished}
			b.StartTimer()

			r = mock.Drive(s, 0, last)

			b.StopTimer()
			if len(r.Deployments) != p {
				b.Fatalf("%d deployments, want %d sinks", len(r.Deployments), p)
			}
			if id := r.Deployments[p-1].Descriptor.GetAttempt().GetJobVertexId(); id != string(mock.Sink) {
				b.Fatalf("deployed %s, want sinks", id)
			}
			b.StartTimer()
		}
		reportPerSecond(b, p, "tasks/s")
	})
}

// BenchmarkDeployingTasksInStreamingJob times deploying every task of a
// STREAMING job (one pipelined region, scheduled as one bulk) and putting
// every TDD on the wire: Step(StartScheduling), the slot offers that
// complete the bulk, Ready, and proto.Marshal of every TDD handed to a stub
// TaskManager gateway, plus the offloaded blobs once (Flink's
// DeployingTasksInStreamingJobBenchmark times Execution.deploy, which
// serializes the TDD). The declarative slot pool rejects offers nobody asked
// for, so the slots cannot be offered before scheduling starts; the offers
// are inside the timer. It reports the bytes sent.
func BenchmarkDeployingTasksInStreamingJob(b *testing.B) {
	forEachParallelism(b, func(b *testing.B, p int) {
		cfg := mock.Config()
		jg := mock.StreamingJob(p)
		offers := mock.TaskManagersFor(p, benchSlotsPerTM)
		var sent, blobs int64
		gateway := func(tm string, data []byte) { sent += int64(len(data)) }
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			s := mock.New(cfg, jg)
			runtime.GC()
			b.StartTimer()

			mock.Drive(s, 0, scheduler.StartScheduling{})
			r := mock.Offer(s, 0, offers)
			for _, blob := range r.OffloadedBlobs {
				blobs++
				gateway("blob-server", blob.Data)
			}
			for _, d := range r.Deployments {
				data, err := proto.Marshal(d.Descriptor)
				if err != nil {
					b.Fatal(err)
				}
				gateway(d.TaskManager.ID, data)
			}

			b.StopTimer()
			if len(r.Deployments) != 2*p {
				b.Fatalf("%d deployments, want %d", len(r.Deployments), 2*p)
			}
			b.StartTimer()
		}
		b.ReportMetric(float64(sent)/float64(b.N)/1e6, "MB-sent")
		b.ReportMetric(float64(blobs)/float64(b.N), "blobs")
		reportPerSecond(b, 2*p, "tasks/s")
	})
}

// BenchmarkRegionToRestartInStreamingJob times the failure of one source of
// a running STREAMING job: restart-pipelined-region picks the single region
// of 2×parallelism tasks, which are all canceled ahead of the restart
// (Flink's RegionToRestartInStreamingJobBenchmark times the choice only).
func BenchmarkRegionToRestartInStreamingJob(b *testing.B) {
	forEachParallelism(b, func(b *testing.B, p int) {
		cfg := mock.RestartingConfig(1, time.Second)
		want := 2 * p
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			s, r := started(b, cfg, mock.StreamingJob(p), p)
			if len(r.Deployments) != 2*p {
				b.Fatalf("setup: %d deployments, want %d", len(r.Deployments), 2*p)
			}
			sources := mock.Attempts(s, mock.Source)
			mock.Report(s, 0, eg.Running, sources...)
			mock.Report(s, 0, eg.Running, mock.Attempts(s, mock.Sink)...)
			fail := scheduler.TaskStateChanged{Attempt: sources[0], State: eg.Failed, Cause: errors.New("for test")}
			b.StartTimer()

			r = mock.Drive(s, 0, fail)

			b.StopTimer()
			checkRestart(b, s, r, want, want-1)
			b.StartTimer()
		}
		reportPerSecond(b, want, "tasks/s")
	})
}

// BenchmarkRegionToRestartInBatchJob times a failover in a BATCH job whose
// sources have finished and whose sinks are deployed. Flink's
// RegionToRestartInBatchJobBenchmark asks the strategy about source 0,
// which gives source 0's region and every region consuming its partition:
// 1 + parallelism tasks. A finished task cannot report FAILED, so here sink
// 0 fails for want of source 0's partition (PartitionNotFound): the strategy
// walks sink 0's region → source 0's region (partition no longer available)
// → every sink region, the same 1 + parallelism tasks.
func BenchmarkRegionToRestartInBatchJob(b *testing.B) {
	forEachParallelism(b, func(b *testing.B, p int) {
		cfg := mock.RestartingConfig(1, time.Second)
		want := p + 1
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			s := batchSinksDeployed(b, cfg, p)
			g := s.Graph()
			source0 := g.JobVertex(mock.Source).Produced[0].FirstPartition
			cause := &failover.PartitionNotFoundError{ResultPartitionID: g.PartitionID(source0).String(), Detail: "for test"}
			fail := scheduler.TaskStateChanged{Attempt: mock.Attempts(s, mock.Sink)[0], State: eg.Failed, Cause: cause}
			b.StartTimer()

			r := mock.Drive(s, 0, fail)

			b.StopTimer()
			// Source 0 (FINISHED) and sink 0 (FAILED) need no cancel.
			checkRestart(b, s, r, want, p-1)
			b.StartTimer()
		}
		reportPerSecond(b, want, "tasks/s")
	})
}

func checkRestart(b *testing.B, s *scheduler.Scheduler, r scheduler.Ready, restarted, canceled int) {
	b.Helper()
	h := s.ExceptionHistory()
	if len(h) == 0 {
		b.Fatal("no failure recorded")
	}
	if got := h[len(h)-1].Restarted; got != restarted {
		b.Fatalf("failure restarts %d tasks, want %d", got, restarted)
	}
	if len(r.Cancellations) != canceled {
		b.Fatalf("%d cancellations, want %d", len(r.Cancellations), canceled)
	}
	if s.Status().IsGloballyTerminal() {
		b.Fatalf("job %s, want it to restart", s.Status())
	}
}

// BenchmarkPartitionReleaseInBatchJob times every sink of a BATCH job
// reporting FINISHED: once the last sink region finishes, every partition of
// the sources has been consumed and is released (Flink's
// PartitionReleaseInBatchJobBenchmark); the job then finishes.
func BenchmarkPartitionReleaseInBatchJob(b *testing.B) {
	forEachParallelism(b, func(b *testing.B, p int) {
		cfg := mock.Config()
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			s := batchSinksDeployed(b, cfg, p)
			sinks := mock.Attempts(s, mock.Sink)
			b.StartTimer()

			r := mock.Report(s, 0, eg.Finished, sinks...)

			b.StopTimer()
			released := 0
			for _, pr := range r.PartitionReleases {
				released += len(pr.Partitions)
			}
			if released != p {
				b.Fatalf("%d partitions released, want %d", released, p)
			}
			if s.Status() != scheduler.JobFinished {
				b.Fatalf("job %s, want FINISHED", s.Status())
			}
			b.StartTimer()
		}
		reportPerSecond(b, p, "tasks/s")
	})
}
