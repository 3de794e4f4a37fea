package kafkatest

import (
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
// with the same data. Its methods are called from the test's goroutine.
type OwnBroker struct {
	t           testing.TB
	addr        string
	port, cport int
	dir         string
	mu          sync.Mutex
	cmd         *exec.Cmd
	done        chan struct{}
	log         string
}

// StartOwnBroker starts a broker on free loopback ports with its data in
// a directory of the test, stopped when the test ends. Without java (or,
// on a machine that never fetched Kafka, mvn) the test fails under CI=true
// and skips elsewhere, as Broker does.
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
	b := &OwnBroker{t: t, port: freePort(t), cport: freePort(t), dir: t.TempDir()}
	b.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port))
	t.Cleanup(b.Stop)
	b.Start()
	return b
}

// Addr is the broker's host:port.
func (b *OwnBroker) Addr() string { return b.addr }

// Logs are the paths of the broker's logs, one per start, oldest first.
func (b *OwnBroker) Logs() []string {
	logs, _ := filepath.Glob(filepath.Join(b.dir, "broker-*.log"))
	return logs
}

// Start starts the broker (again, after Stop) and waits until it serves
// clients (at most five minutes: a first run fetches Kafka). Blocking.
func (b *OwnBroker) Start() {
	b.t.Helper()
	_, file, _, _ := runtime.Caller(0)
	run := filepath.Join(filepath.Dir(file), "..", "..", "..", "scripts", "kafka", "run.sh")
	b.log = filepath.Join(b.dir, fmt.Sprintf("broker-%d.log", time.Now().UnixNano()))
	logf, err := os.Create(b.log)
	if err != nil {
		b.t.Fatal(err)
	}
	cmd := exec.Command(run)
	cmd.Env = append(os.Environ(), "KAFKA_PORT="+strconv.Itoa(b.port), "KAFKA_CONTROLLER_PORT="+strconv.Itoa(b.cport),
		"KAFKA_DIR="+filepath.Join(b.dir, "kafka"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // its java child stops with it
	if err := cmd.Start(); err != nil {
		logf.Close()
		b.t.Fatalf("kafkatest: starting %s: %v", run, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	b.mu.Lock()
	b.cmd, b.done = cmd, done
	b.mu.Unlock()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		out, _ := os.ReadFile(b.log)
		if strings.Contains(string(out), "KAFKA READY") && strings.Contains(string(out), "Kafka Server started") {
			return
		}
		select {
		case <-done:
			out, _ = os.ReadFile(b.log)
			b.t.Fatalf("kafkatest: the broker exited before it was ready (%v):\n%s", cmd.ProcessState, tail(out))
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.Stop()
			b.t.Fatalf("kafkatest: the broker was not ready in 5 minutes:\n%s", tail(out))
		}
	}
}

// Stop stops the broker (SIGTERM to its session, SIGKILL after a minute)
// and waits until it is gone; its data stays for Start. Idempotent.
func (b *OwnBroker) Stop() {
	b.mu.Lock()
	cmd, done := b.cmd, b.done
	b.cmd = nil
	b.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(time.Minute):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	// The java child is in the same session: wait until the port is free
	// so that a restart can bind it.
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", b.addr, time.Second)
		if err != nil {
			return
		}
		c.Close()
	}
	b.t.Errorf("kafkatest: the broker at %s still answers a minute after it was stopped", b.addr)
}

// Restart stops the broker and starts it again on the same port.
func (b *OwnBroker) Restart() {
	b.t.Helper()
	b.Stop()
	b.Start()
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
