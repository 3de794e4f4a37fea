package kafkatest

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// OwnBroker is a Kafka broker (scripts/kafka/run.sh, KRaft) that a test
// started for itself, so that it may stop and restart it on the same port
// with the same data. Its KRaft controller runs in a process of its own
// that stays up for the test's life, as in a real cluster, and a restarted
// broker starts only once the controller has fenced the stopped one: it
// then catches up a metadata log in which it leads nothing, and leads its
// partitions again, by the controller's election once it is unfenced,
// before its transaction coordinator loads and resumes the markers left
// pending. (Started at once, it would act on the leadership it had, until
// the controller fenced the old incarnation: a moment without leaders in
// which Kafka skips those markers; issue #16.) Its methods are called from
// the test's goroutine.
type OwnBroker struct {
	t           testing.TB
	addr        string
	port, cport int
	dir         string
	clusterID   string
	mu          sync.Mutex
	controller  *node
	broker      *node
	// fencesAtStop is how many times the controller had fenced the broker
	// when it was last stopped; -1 before a first stop.
	fencesAtStop int
}

// node is a running run.sh: its session holds the java child.
type node struct {
	cmd  *exec.Cmd
	addr string        // the port it listens on, free once it is gone
	log  string        // its output
	done chan struct{} // closed when run.sh has exited
}

// brokerFenced starts the line the controller logs (at INFO, as run.sh
// sets for a controller apart) when it fences the broker, run.sh's node 2,
// whose session timed out (broker.session.timeout.ms, 9 s by default).
const brokerFenced = "Fencing broker 2 "

// StartOwnBroker starts a controller and a broker on free loopback ports
// with their data in a directory of the test, stopped when the test ends.
// Without java (or, on a machine that never fetched Kafka, mvn) the test
// fails under CI=true and skips elsewhere, as Broker does.
func StartOwnBroker(t testing.TB) *OwnBroker {
	t.Helper()
	missing := ""
	if _, err := exec.LookPath("java"); err != nil {
		missing = "java is not on PATH"
	}
	if missing != "" {
		msg := "cannot start a Kafka broker of the test's own: " + missing
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true, so Kafka tests must run: " + msg)
		}
		t.Skip("skipping: " + msg)
	}
	b := &OwnBroker{t: t, port: freePort(t), cport: freePort(t), dir: t.TempDir(), clusterID: clusterID(t), fencesAtStop: -1}
	b.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port))
	t.Cleanup(b.Close)
	ctl := b.run("controller", b.cport)
	b.mu.Lock()
	b.controller = ctl
	b.mu.Unlock()
	b.Start()
	return b
}

// Addr is the broker's host:port.
func (b *OwnBroker) Addr() string { return b.addr }

// Logs are the paths of the controller's log, then the broker's, one per
// start, oldest first.
func (b *OwnBroker) Logs() []string {
	ctl, _ := filepath.Glob(filepath.Join(b.dir, "controller-*.log"))
	brokers, _ := filepath.Glob(filepath.Join(b.dir, "broker-*.log"))
	return append(ctl, brokers...)
}

// Start starts the broker (again, after Stop: once the controller has
// fenced the stopped one) and waits until it serves clients (at most five
// minutes: a first run fetches Kafka). Blocking.
func (b *OwnBroker) Start() {
	b.t.Helper()
	b.awaitFence()
	n := b.run("broker", b.port)
	b.mu.Lock()
	b.broker = n
	b.mu.Unlock()
}

// Stop stops the broker (SIGTERM to its session, SIGKILL after a minute)
// and waits until it is gone; its data stays for Start, and the controller
// runs on. Idempotent.
func (b *OwnBroker) Stop() {
	b.mu.Lock()
	n := b.broker
	b.broker = nil
	if n != nil {
		b.fencesAtStop = b.fences()
	}
	b.mu.Unlock()
	b.stop(n)
}

// fences counts the controller's fences of the broker in its log.
func (b *OwnBroker) fences() int {
	if b.controller == nil {
		return 0
	}
	out, _ := os.ReadFile(b.controller.log)
	return strings.Count(string(out), brokerFenced)
}

// awaitFence waits (at most a minute) until the controller has fenced the
// broker last stopped, if any.
func (b *OwnBroker) awaitFence() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fencesAtStop < 0 {
		return
	}
	// Polling the controller's log: it is the only witness of the fence
	// (the controller serves no broker metadata to clients).
	for deadline := time.Now().Add(time.Minute); b.fences() <= b.fencesAtStop; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.t.Fatalf("kafkatest: the controller did not fence the stopped broker in a minute")
		}
	}
	b.fencesAtStop = -1
}

// Restart stops the broker and starts it again on the same port.
func (b *OwnBroker) Restart() {
	b.t.Helper()
	b.Stop()
	b.Start()
}

// Close stops the broker, then the controller. Idempotent.
func (b *OwnBroker) Close() {
	b.Stop()
	b.mu.Lock()
	n := b.controller
	b.controller = nil
	b.mu.Unlock()
	b.stop(n)
}

// run starts run.sh as role (KAFKA_ROLE) with its log in the test's
// directory, and waits until it listens on port and Kafka has started.
func (b *OwnBroker) run(role string, port int) *node {
	b.t.Helper()
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "..", "scripts", "kafka", "run.sh")
	log := filepath.Join(b.dir, fmt.Sprintf("%s-%d.log", role, time.Now().UnixNano()))
	logf, err := os.Create(log)
	if err != nil {
		b.t.Fatal(err)
	}
	cmd := exec.Command(script)
	cmd.Env = append(os.Environ(), "KAFKA_ROLE="+role, "KAFKA_CLUSTER_ID="+b.clusterID,
		"KAFKA_PORT="+strconv.Itoa(b.port), "KAFKA_CONTROLLER_PORT="+strconv.Itoa(b.cport),
		"KAFKA_DIR="+filepath.Join(b.dir, role))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // its java child stops with it
	if err := cmd.Start(); err != nil {
		logf.Close()
		b.t.Fatalf("kafkatest: starting %s: %v", script, err)
	}
	n := &node{cmd: cmd, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), log: log, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(n.done) }()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		out, _ := os.ReadFile(log)
		if strings.Contains(string(out), "KAFKA READY") && strings.Contains(string(out), "Kafka Server started") {
			return n
		}
		select {
		case <-n.done:
			out, _ = os.ReadFile(log)
			b.t.Fatalf("kafkatest: the Kafka %s exited before it was ready (%v):\n%s", role, cmd.ProcessState, tail(out))
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.stop(n)
			b.t.Fatalf("kafkatest: the Kafka %s was not ready in 5 minutes:\n%s", role, tail(out))
		}
	}
}

// stop stops n (SIGTERM to its session, SIGKILL after a minute) and waits
// until its port is free. A nil n is already stopped.
func (b *OwnBroker) stop(n *node) {
	if n == nil {
		return
	}
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(time.Minute):
		_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
		<-n.done
	}
	// The java child is in the same session: wait until the port is free
	// so that a restart can bind it.
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", n.addr, time.Second)
		if err != nil {
			return
		}
		c.Close()
	}
	b.t.Errorf("kafkatest: %s still answers a minute after it was stopped", n.addr)
}

// clusterID draws a KRaft cluster ID shared by the controller and the
// broker: 16 random bytes, URL-safe base64 without padding, not starting
// with '-' (kafka-storage would read it as an option).
func clusterID(t testing.TB) string {
	for {
		var raw [16]byte
		if _, err := rand.Read(raw[:]); err != nil {
			t.Fatal(err)
		}
		if id := base64.RawURLEncoding.EncodeToString(raw[:]); id[0] != '-' {
			return id
		}
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func tail(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-30):], "\n")
}
