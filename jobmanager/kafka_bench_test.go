package jobmanager_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/gofl/gofl/connectors/kafka/kafkatest"
	"github.com/gofl/gofl/rpc/restapi"
)

// BenchmarkKafkaVsPlain is issue 16's Kafka yardstick: kafka-counts (Kafka
// → keyed count → Kafka, at parallelism 2, bounded by the input's latest
// offsets, at-least-once sink, checkpointing off) on a cluster of real
// processes against a plain franz-go consume-and-produce loop (one process,
// a map of counts, the same output records) on the same broker, the same
// input records and the same partitions (2 in, 2 out). Each reports
// records/s from its start (job submission; the loop's first client) until
// the last output record is acknowledged (the job FINISHED: its sink
// flushes at the end of the input), and ratio is gofl/plain. The goal is
// 0.7 or more. The job's figure includes planning, submission and
// deployment (a few seconds on a loaded machine); gofl-deployed-records/s
// and ratio-deployed count from the moment every reader runs instead, as a
// throughput of a running job (Flink's benchmarks measure that).
// GOFL_BENCH_KAFKA_RECORDS sets the input (default 1,000,000).
//
// On a shared machine the wall clock is noisy, so the CPU each side spent
// per million records is reported too: gofl-cpu-s/M sums the TaskManager
// processes with their reaped runners and this process (the JobManager)
// from submission until the runners ended; plain-cpu-s/M is this process
// during the loop; broker-*-cpu-s/M is the broker's (a java process found
// by its listener) during each.
func BenchmarkKafkaVsPlain(b *testing.B) {
	n := kafkatest.BenchRecords(1_000_000)
	const keys, partitions = 1024, 2
	broker := kafkatest.Broker(b)
	in := kafkatest.Topic(b, broker, "bench-in", partitions)
	for from := 0; from < n; from += 100_000 {
		if err := kafkatest.ProduceNumbers(broker, in, partitions, from, min(from+100_000, n)); err != nil {
			b.Fatal(err)
		}
	}
	adm := kafkatest.Admin(b, broker)
	c := newCluster(b, nil)
	c.startTaskManagerProcessWith("tm-0", 2, nil)
	c.startTaskManagerProcessWith("tm-1", 2, nil)
	c.waitForTaskManagers(2)
	tms := []int{c.tmPid("tm-0"), c.tmPid("tm-1")}
	brokerPid := kafkaBrokerPid(broker)
	b.ResetTimer()
	var goflTime, goflRunning, plainTime time.Duration
	var goflCPU, plainCPU, goflBrokerCPU, plainBrokerCPU time.Duration
	for i := 0; i < b.N; i++ {
		out := kafkatest.Topic(b, broker, "bench-gofl-out", partitions)
		start := time.Now()
		cpu0, bcpu0 := selfCPU()+procsCPU(tms...), procsCPU(brokerPid)
		id := c.runSDKJob(testJobBinary, 2, "kafka-counts", "--brokers", broker, "--input", in, "--output", out,
			"--keys", strconv.Itoa(keys), "--prefix", "gofl-bench-"+out, "--bounded", "--at-least-once")
		// Deployed: every reader runs (or already ended).
		c.waitSubtasks(id, c.vertexID(id, "Kafka Numbers"), 10*time.Minute, func(ss []restapi.SubtaskInfo) error {
			for _, s := range ss {
				if s.Status != "RUNNING" && s.Status != "FINISHED" {
					return fmt.Errorf("reader %s", s.Status)
				}
			}
			return nil
		})
		deployed := time.Now()
		waitKafkaJob(b, c, id, 3*time.Minute)
		goflTime += time.Since(start)
		goflRunning += time.Since(deployed)
		goflBrokerCPU += procsCPU(brokerPid) - bcpu0
		// The runners' CPU counts once the TaskManagers reaped them.
		c.eventually(time.Minute, func() error {
			if pids := runnerPids(id); len(pids) > 0 {
				return fmt.Errorf("runners %v still run", pids)
			}
			return nil
		})
		goflCPU += selfCPU() + procsCPU(tms...) - cpu0
		checkTopicRecords(b, adm, out, n)

		out = kafkatest.Topic(b, broker, "bench-plain-out", partitions)
		start = time.Now()
		cpu0, bcpu0 = selfCPU(), procsCPU(brokerPid)
		if err := kafkatest.PlainCounts(broker, in, out, n, keys); err != nil {
			b.Fatal(err)
		}
		plainTime += time.Since(start)
		plainCPU += selfCPU() - cpu0
		plainBrokerCPU += procsCPU(brokerPid) - bcpu0
		checkTopicRecords(b, adm, out, n)
	}
	gofl := float64(n) * float64(b.N) / goflTime.Seconds()
	plain := float64(n) * float64(b.N) / plainTime.Seconds()
	b.ReportMetric(gofl, "gofl-records/s")
	b.ReportMetric(plain, "plain-records/s")
	b.ReportMetric(gofl/plain, "ratio")
	running := float64(n) * float64(b.N) / goflRunning.Seconds()
	b.ReportMetric(running, "gofl-deployed-records/s")
	b.ReportMetric(running/plain, "ratio-deployed")
	perM := func(d time.Duration) float64 { return d.Seconds() * 1e6 / float64(n) / float64(b.N) }
	b.ReportMetric(perM(goflCPU), "gofl-cpu-s/M")
	b.ReportMetric(perM(plainCPU), "plain-cpu-s/M")
	if brokerPid != 0 {
		b.ReportMetric(perM(goflBrokerCPU), "broker-gofl-cpu-s/M")
		b.ReportMetric(perM(plainBrokerCPU), "broker-plain-cpu-s/M")
	}
}

// waitKafkaJob waits until job id FINISHED; when it does not, it logs
// every vertex's subtask states and the tails of the runners' logs.
func waitKafkaJob(b *testing.B, c *cluster, id string, timeout time.Duration) {
	b.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, timeout)
	defer cancel()
	if _, err := c.client.WaitForJobStatus(ctx, id, "FINISHED"); err == nil {
		return
	}
	if d, err := c.client.JobDetails(c.ctx, id); err == nil {
		for _, v := range d.Vertices {
			if jv, err := c.client.JobVertex(c.ctx, id, v.ID); err == nil {
				for _, st := range jv.Subtasks {
					b.Logf("%s[%d]: %s", v.Name, st.Subtask, st.Status)
				}
			}
		}
	}
	_ = filepath.WalkDir(c.dir, func(path string, _ os.DirEntry, err error) error {
		if err == nil && filepath.Base(path) == "runner.log" {
			if data, err := os.ReadFile(path); err == nil {
				lines := strings.Split(string(data), "\n")
				b.Logf("%s:\n%s", path, strings.Join(lines[max(0, len(lines)-60):], "\n"))
			}
		}
		return nil
	})
	b.Fatalf("job %s did not finish in %s", id, timeout)
}

// selfCPU is the user+system CPU time of this process.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procsCPU sums utime, stime, cutime and cstime of /proc/<pid>/stat
// (the process and its reaped children) over pids, in clock ticks of
// 1/100 s (USER_HZ); a pid that is gone counts 0.
func procsCPU(pids ...int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || pid == 0 {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // f[0] is field 3, state
		for _, i := range []int{11, 12, 13, 14} {                // fields 14-17
			if i < len(f) {
				t, _ := strconv.ParseInt(f[i], 10, 64)
				sum += time.Duration(t) * 10 * time.Millisecond
			}
		}
	}
	return sum
}

// kafkaBrokerPid is the pid of the java broker listening at addr (its
// server.properties names the listener), or 0.
func kafkaBrokerPid(addr string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmd), "kafka.Kafka") {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00")
		props, err := os.ReadFile(args[len(args)-1])
		if err == nil && strings.Contains(string(props), "PLAINTEXT://"+addr+"\n") {
			return pid
		}
	}
	return 0
}

// checkTopicRecords checks that topic holds n records (its end offsets).
func checkTopicRecords(b *testing.B, adm *kadm.Client, topic string, n int) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		b.Fatal(err)
	}
	sum := int64(0)
	ends.Each(func(o kadm.ListedOffset) { sum += o.Offset })
	if sum != int64(n) {
		b.Fatalf("%s holds %d records, want %d", topic, sum, n)
	}
}
