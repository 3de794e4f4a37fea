package stream

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
)

// EnvProfileDir, when set in a runner's environment, makes the runner write
// a CPU profile and an allocation profile of its whole life into that
// directory (cpu-PID.pprof, allocs-PID.pprof): the way to profile the data
// plane of a job on a real cluster (make bench-wordcount PROFILE=dir).
const EnvProfileDir = "GOFL_PROFILE_DIR"

// startProfile starts the runner's profiles when EnvProfileDir is set and
// returns the function that stops and writes them; it never fails the job.
func startProfile() (stop func()) {
	dir := os.Getenv(EnvProfileDir)
	if dir == "" {
		return func() {}
	}
	pid := os.Getpid()
	cpu, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-%d.pprof", pid)))
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
		if f, err := os.Create(filepath.Join(dir, fmt.Sprintf("allocs-%d.pprof", pid))); err == nil {
			_ = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
}
