package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/ha"
	"github.com/gofl/gofl/ha/zktest"
)

var restLine = regexp.MustCompile(`REST at http://(\S+)`)

// TestDeploySessionStandbyJobManagersE2E starts a local session with two
// JobManagers sharing a real ZooKeeper, runs a job, kills the leader -9,
// and runs another job through the CLI, which reaches the new leader
// through the surviving JobManager; session stop leaves nothing behind.
func TestDeploySessionStandbyJobManagersE2E(t *testing.T) {
	t.Parallel()
	quorum := zktest.Quorum(t)
	e := newE2E(t)
	clusterID := fmt.Sprintf("/e2e-%d", time.Now().UnixNano())
	e.extraArg = []string{"-D", "high-availability.type=zookeeper", "-D", "high-availability.zookeeper.quorum=" + quorum,
		"-D", "high-availability.cluster-id=" + clusterID, "-D", "high-availability.storageDir=file://" + filepath.Join(e.home, "ha")}
	if r := e.run("session", "start", "-t", "local", "--name", "bad", "--jobmanagers", "2", "-D", "high-availability.type=none"); r.code == 0 ||
		!strings.Contains(r.stderr, "need high-availability.type zookeeper") {
		t.Errorf("two JobManagers without HA: exit %d, %s", r.code, r.stderr)
	}
	expectOK(t, e.run("session", "start", "-t", "local", "--name", "ha2", "--jobmanagers", "2", "-n", "1"), "session start --jobmanagers 2")
	out1 := filepath.Join(e.home, "out1")
	expectOK(t, e.run("run", "-m", "session", "-c", "ha2", e.wc, "--input", e.input, "--output", out1), "run before the failover")
	e.checkCounts(out1)

	// Find and kill the leader.
	cfg, err := conf.FromMap(map[string]string{"high-availability.type": "zookeeper", "high-availability.zookeeper.quorum": quorum,
		"high-availability.cluster-id": clusterID, "high-availability.storageDir": "file://" + filepath.Join(e.home, "ha")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	services, err := ha.New(ctx, ha.ConfigFromConf(cfg, zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	defer services.Close()
	leader, err := ha.RetrieveLeader(ctx, services, ha.RestServerComponent)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(e.clustersDir(), "ha2")
	pid := 0
	for _, jm := range []string{"jobmanager", "jobmanager-2"} {
		log, _ := os.ReadFile(filepath.Join(dir, jm, "gofl.log"))
		if m := restLine.FindSubmatch(log); m != nil && string(m[1]) == leader.Address {
			b, _ := os.ReadFile(filepath.Join(dir, jm, "pid"))
			pid, _ = strconv.Atoi(strings.Fields(string(b) + " 0")[0])
		}
	}
	if pid <= 0 {
		t.Fatalf("no JobManager of ha2 serves REST at the leader's %s", leader.Address)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := e.run("session", "list")
	if r.code != 0 || !regexp.MustCompile(`ha2 \*\s+local\s+session\s+running`).MatchString(r.stdout) {
		t.Errorf("session list after the leader's kill: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The survivor takes over once the dead leader's ZooKeeper session
	// expires; until then the CLI gets its "no leader" answer.
	out2 := filepath.Join(e.home, "out2")
	deadline := time.Now().Add(60 * time.Second)
	for {
		r = e.run("run", "-m", "session", "-c", "ha2", e.wc, "--input", e.input, "--output", out2)
		if r.code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run after the failover: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		_ = os.RemoveAll(out2)
		time.Sleep(500 * time.Millisecond)
	}
	e.checkCounts(out2)
	expectOK(t, e.run("session", "stop"), "session stop")
}
