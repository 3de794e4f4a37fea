package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The exit error of a runner carries what it printed last, a panic's
// message first, since its log is deleted with the TaskManager's
// directory (issue 13, bug 3).
func TestCrashReportKeepsThePanic(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "runner.log")
	noise := strings.Repeat("{\"level\":\"info\",\"message\":\"processing\"}\n", 200)
	if err := os.WriteFile(log, []byte(noise+"panic: index out of range [3] with length 3\n\ngoroutine 7 [running]:\nmain.build.func1()\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := crashReport(log)
	if !strings.Contains(got, "panic: index out of range [3] with length 3") || !strings.Contains(got, "goroutine 7") || strings.Contains(got, "processing") {
		t.Fatalf("crashReport = %q", got)
	}
	if err := os.WriteFile(log, []byte(noise+"fatal error: out of memory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := crashReport(log); !strings.HasSuffix(got, "fatal error: out of memory") || len(got) > 2100 {
		t.Fatalf("crashReport without a panic = %d bytes, %q...", len(got), got[:min(len(got), 80)])
	}
	if got := crashReport(filepath.Join(dir, "missing")); got != "" {
		t.Fatalf("crashReport of no log = %q", got)
	}
}
