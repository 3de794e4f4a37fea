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
	pid, _, _, _ := sessionLeader(t, e, "ha2", map[string]string{"high-availability.type": "zookeeper", "high-availability.zookeeper.quorum": quorum,
		"high-availability.cluster-id": clusterID, "high-availability.storageDir": "file://" + filepath.Join(e.home, "ha")})
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
			t.Fatalf("run after the failover: exit %d\n%s%s\n%s", r.code, r.stdout, r.stderr, e.logTails(30))
		}
		_ = os.RemoveAll(out2)
		time.Sleep(500 * time.Millisecond)
	}
	e.checkCounts(out2)
	expectOK(t, e.run("session", "stop"), "session stop")
}

// sessionLeader finds which JobManager of a local session with two
// (jobmanager, jobmanager-2) leads, by the REST address ZooKeeper names
// (haSettings: the session's high-availability.* options); it returns the
// leader's pid and REST address and the other JobManager's REST address
// and directory.
func sessionLeader(t *testing.T, e *e2e, session string, haSettings map[string]string) (pid int, rest, otherRest, otherDir string) {
	t.Helper()
	cfg, err := conf.FromMap(haSettings)
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
	for _, jm := range []string{"jobmanager", "jobmanager-2"} {
		dir := filepath.Join(e.clustersDir(), session, jm)
		log, _ := os.ReadFile(filepath.Join(dir, "gofl.log"))
		m := restLine.FindSubmatch(log)
		if m != nil && string(m[1]) == leader.Address {
			b, _ := os.ReadFile(filepath.Join(dir, "pid"))
			pid, _ = strconv.Atoi(strings.Fields(string(b) + " 0")[0])
		} else if m != nil {
			otherRest, otherDir = string(m[1]), dir
		}
	}
	if pid <= 0 || otherRest == "" {
		t.Fatalf("no JobManager of %s serves REST at the leader's %s, or no other one", session, leader.Address)
	}
	return pid, leader.Address, otherRest, otherDir
}
