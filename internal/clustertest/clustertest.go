// Package clustertest holds the helpers the tests of the local and Nomad
// providers share: building the gofl binary they deploy, finding the
// processes a provider started for a cluster (Linux: it reads /proc),
// waiting for a condition, reading a JobManager's REST API.
package clustertest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gofl/gofl/rpc/restapi"
)

// Main is a provider test package's TestMain: it builds cmd/gofl (pkg, the
// relative path of its package) into a temporary directory, sets *binary,
// runs the tests, removes the directory and checks for leaked goroutines.
// args, if set, returns further `go build` flags, given that directory.
func Main(m *testing.M, pkg string, binary *string, args func(dir string) []string) {
	dir, err := os.MkdirTemp("", "gofl-provider-test")
	if err != nil {
		panic(err)
	}
	*binary = filepath.Join(dir, "gofl")
	buildArgs := []string{"build"}
	if args != nil {
		buildArgs = append(buildArgs, args(dir)...)
	}
	build := exec.Command("go", append(buildArgs, "-o", *binary, pkg)...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building gofl:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// DefaultParallel sets -test.parallel to n unless the command line set it.
// A TestMain calls it before m.Run: e2e tests mostly wait on processes and
// timeouts, so more of them than GOMAXPROCS (the default) overlap well.
func DefaultParallel(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
			panic(err)
		}
	}
}

// Ctx is a context that ends after d or with the test.
func Ctx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Eventually polls cond every 20 ms until it holds; after timeout the test
// fails, naming what it waited for.
func Eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for: %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// GetJSON decodes the 200 answer of GET url into v; false on any failure.
func GetJSON(url string, v any) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	return json.NewDecoder(resp.Body).Decode(v) == nil
}

// TaskManagers lists the TaskManagers registered at the JobManager whose
// REST API is at rest (host:port); nil if it does not answer.
func TaskManagers(rest string) []restapi.TaskManagerInfo {
	var tms restapi.TaskManagersInfo
	if !GetJSON("http://"+rest+"/taskmanagers", &tms) {
		return nil
	}
	return tms.TaskManagers
}

// TaskManagerIDs is the sorted IDs of TaskManagers(rest).
func TaskManagerIDs(rest string) []string {
	var ids []string
	for _, tm := range TaskManagers(rest) {
		ids = append(ids, tm.ID)
	}
	slices.Sort(ids)
	return ids
}

// FastCluster is the configuration of a test cluster: quick heartbeats, a
// heartbeat timeout long enough that only the provider's events explain a
// prompt removal of a TaskManager.
func FastCluster() map[string]string {
	return map[string]string{
		"heartbeat.interval":                  "200ms",
		"heartbeat.timeout":                   "5 min",
		"taskmanager.numberOfTaskSlots":       "2",
		"resourcemanager.taskmanager-timeout": "1h",
		"log.level":                           "debug",
	}
}

// ClusterProcesses lists the live processes started for the cluster (their
// environment has GOFL_CLUSTER_ID=clusterID) whose command line contains
// every one of match, zombies excluded. It fails only when /proc cannot be
// read.
func ClusterProcesses(clusterID string, match ...string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("clustertest: %w", err)
	}
	want := []byte("GOFL_CLUSTER_ID=" + clusterID + "\x00")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, want) {
			continue
		}
		st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && st[i+2] == 'Z' {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		ok := true
		for _, m := range match {
			ok = ok && bytes.Contains(cmdline, []byte(m))
		}
		if ok {
			out = append(out, pid)
		}
	}
	return out, nil
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers (a process's
// output, a logger's goroutines) and a polling reader.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
