package taskmanager

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gofl/gofl/logs"
	"github.com/gofl/gofl/storage"
)

// The shipper archives the TaskManager's log and its runners' logs when
// asked (a runner died) and once more when stopped, with what was appended
// meanwhile.
func TestLogShipperArchivesOnRequestAndAtStop(t *testing.T) {
	dir := t.TempDir()
	own := filepath.Join(dir, "gofl.log")
	jobID := "0123456789abcdef0123456789abcdef"
	runnerDir := filepath.Join(dir, "work", "jobs", jobID)
	if err := os.MkdirAll(runnerDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(own, []byte("started\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(runnerDir, logs.RunnerOutFile), []byte("printed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	archive := logs.NewArchive(storage.Local(), filepath.Join(dir, "archive"))
	te, err := New(Config{NumberOfSlots: 1, ResourceManagerAddress: "127.0.0.1:1", ResourceID: "tm-ship", NoRPCServer: true,
		WorkDir: filepath.Join(dir, "work"), LogFile: own, LogArchive: archive}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer te.exec.Close()
	proc, _ := logs.TaskManagerProcess("tm-ship")
	read := func(name string) string {
		r, err := archive.Open(context.Background(), proc, name)
		if err != nil {
			return ""
		}
		defer r.Close()
		b, _ := io.ReadAll(r)
		return string(b)
	}
	stop := te.startLogShipper()
	te.shipLogsSoon()
	deadline := time.Now().Add(time.Minute)
	for read("runner-"+jobID+".out") != "printed\n" || read(logs.TaskManagerLog) != "started\n" {
		if time.Now().After(deadline) {
			t.Fatalf("not archived after a minute: %q %q", read("runner-"+jobID+".out"), read(logs.TaskManagerLog))
		}
		time.Sleep(20 * time.Millisecond)
	}
	f, err := os.OpenFile(filepath.Join(runnerDir, logs.RunnerOutFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("printed at the end\n")
	f.Close()
	stop()
	if got := read("runner-" + jobID + ".out"); got != "printed\nprinted at the end\n" {
		t.Fatalf("after stop: %q", got)
	}
}
