// Package profiling writes a gofl process's CPU and allocation profiles
// when GOFL_PROFILE_DIR is set: the job runners' (the data plane) and the
// client's, JobManager's and TaskManager's (the control plane), so one
// run of a job on a real cluster profiles all of it.
package profiling

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
)

// EnvProfileDir, when set in a process's environment (processes started by
// gofl inherit it), makes the process write a CPU profile and an
// allocation profile of its life into that directory
// (cpu-ROLE-PID.pprof, allocs-ROLE-PID.pprof): the way to profile a job on
// a real cluster (make bench-wordcount PROFILE=dir).
const EnvProfileDir = "GOFL_PROFILE_DIR"

// Start starts the process's profiles when EnvProfileDir is set and
// returns the function that stops and writes them; role names the process
// in the file names (runner, jobmanager, taskmanager, client). It never
// fails: without the directory there are no profiles.
func Start(role string) (stop func()) {
	dir := os.Getenv(EnvProfileDir)
	if dir == "" {
		return func() {}
	}
	pid := os.Getpid()
	cpu, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-%s-%d.pprof", role, pid)))
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		cpu.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		cpu.Close()
		if f, err := os.Create(filepath.Join(dir, fmt.Sprintf("allocs-%s-%d.pprof", role, pid))); err == nil {
			_ = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
}
