package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pidFile is the name of a process's pid file in its working directory.
const pidFile = "pid"

// logFile is the name of a process's log file in its working directory.
const logFile = "gofl.log"

// exitFile is where a JobManager notes that it ended by itself: empty for
// success, else its error. Without it, its end was abnormal (kill -9).
const exitFile = "exited"

// ExitFileEnv names the environment variable that tells a JobManager the
// local provider started where to note its exit (WriteExitFile).
const ExitFileEnv = "GOFL_EXIT_FILE"

// WriteExitFile notes, for the local provider that started this process
// (ExitFileEnv set), that it ends by itself with err (nil: success), so
// the cluster counts as terminated rather than failed when it ends with
// nil. Called once by `gofl jobmanager` right before it exits; a no-op
// in a process the local provider did not start.
func WriteExitFile(err error) {
	path := os.Getenv(ExitFileEnv)
	if path == "" {
		return
	}
	msg := ""
	if err != nil {
		msg = err.Error() + "\n"
	}
	_ = writeFileAtomic(path, []byte(msg))
}

// procID identifies a process across pid reuse: its pid and, where the
// system tells (Linux), its start time in clock ticks since boot.
type procID struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start,omitempty"`
}

func (p procID) String() string { return fmt.Sprintf("%d %d", p.PID, p.Start) }

// identify returns pid's procID now.
func identify(pid int) procID {
	st, _ := procStat(pid)
	return procID{PID: pid, Start: st.start}
}

type stat struct {
	state byte
	start uint64
}

// procStat reads /proc/<pid>/stat; ok is false where there is none.
func procStat(pid int) (stat, bool) {
	if runtime.GOOS != "linux" {
		return stat{}, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return stat{}, false
	}
	f := strings.Fields(s[i+2:]) // f[0] is field 3 (state)
	if len(f) < 20 {
		return stat{}, false
	}
	start, _ := strconv.ParseUint(f[19], 10, 64) // field 22
	return stat{state: f[0][0], start: start}, true
}

// alive reports whether the process runs: it exists, is no zombie, and
// (when known) started when it was recorded.
func (p procID) alive() bool {
	if p.PID <= 0 {
		return false
	}
	if err := syscall.Kill(p.PID, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	st, ok := procStat(p.PID)
	if !ok {
		return runtime.GOOS != "linux" // no /proc: trust kill(0)
	}
	if st.state == 'Z' || st.state == 'X' {
		return false
	}
	return p.Start == 0 || st.start == p.Start
}

// signalGroup signals the process group p leads, if p is still itself.
func (p procID) signalGroup(sig syscall.Signal) {
	if !p.alive() {
		// The leader is gone; members may remain, but only if the group
		// is still ours. A group ID is not reused while any member lives,
		// so signalling it is safe unless the leader's pid was recycled.
		if st, ok := procStat(p.PID); ok && p.Start != 0 && st.start != p.Start {
			return
		}
	}
	_ = syscall.Kill(-p.PID, sig)
}

// groupAlive reports whether any process of p's group runs.
func (p procID) groupAlive() bool {
	if p.alive() {
		return true
	}
	if st, ok := procStat(p.PID); ok && p.Start != 0 && st.start != p.Start {
		return false // the pid is someone else's now
	}
	err := syscall.Kill(-p.PID, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func writePidFile(dir string, p procID) error {
	return writeFileAtomic(filepath.Join(dir, pidFile), []byte(p.String()+"\n"))
}

func readPidFile(dir string) (procID, bool) {
	b, err := os.ReadFile(filepath.Join(dir, pidFile))
	if err != nil {
		return procID{}, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return procID{}, false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return procID{}, false
	}
	p := procID{PID: pid}
	if len(f) > 1 {
		p.Start, _ = strconv.ParseUint(f[1], 10, 64)
	}
	return p, true
}

func writeFileAtomic(path string, data []byte) error {
	tmp := fmt.Sprintf("%s.tmp-%d", path, os.Getpid())
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// stopGroups sends SIGTERM to every group, waits up to grace for them to
// end, then sends SIGKILL to the rest and waits up to another grace (or
// until deadline). It reports the groups still alive at the end.
func stopGroups(groups []procID, grace time.Duration, deadline time.Time) []procID {
	for _, g := range groups {
		g.signalGroup(syscall.SIGTERM)
	}
	waitGroups := func(until time.Time) []procID {
		for {
			var left []procID
			for _, g := range groups {
				if g.groupAlive() {
					left = append(left, g)
				}
			}
			if len(left) == 0 || time.Now().After(until) {
				return left
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	until := time.Now().Add(grace)
	if !deadline.IsZero() && deadline.Before(until) {
		until = deadline
	}
	left := waitGroups(until)
	if len(left) == 0 {
		return nil
	}
	for _, g := range left {
		g.signalGroup(syscall.SIGKILL)
	}
	groups = left
	return waitGroups(time.Now().Add(5 * time.Second))
}

// resolveBinary returns the absolute path of an executable gofl binary.
func resolveBinary(bin string) (string, error) {
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("local: the running executable: %w", err)
		}
		bin = exe
	}
	if strings.Contains(bin, "://") {
		return "", fmt.Errorf("local: gofl binary %q: the local provider runs a local file, not a URL", bin)
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		return "", fmt.Errorf("local: gofl binary %q: %w", bin, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("local: gofl binary: %w", err)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("local: gofl binary %s is not an executable file", abs)
	}
	return abs, nil
}
