package logs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/storage"
)

const jobID = "0123456789abcdef0123456789abcdef"

func source(t *testing.T) (Source, string) {
	t.Helper()
	dir := t.TempDir()
	own := filepath.Join(dir, "gofl.log")
	jobs := filepath.Join(dir, "work", "jobs")
	if err := os.MkdirAll(filepath.Join(jobs, jobID), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(own, "one\ntwo\nthree\n")
	write(filepath.Join(jobs, jobID, RunnerOutFile), "printed\n")
	write(filepath.Join(jobs, jobID, RunnerLogFile), "printed\npanic: boom\n")
	write(filepath.Join(dir, "secret"), "secret")
	// Not a job directory: never listed.
	if err := os.MkdirAll(filepath.Join(jobs, "..x"), 0o755); err != nil {
		t.Fatal(err)
	}
	return Source{Own: own, OwnName: TaskManagerLog, RunnerDir: jobs}, dir
}

func TestSourceListsAndServesOnlyItsFiles(t *testing.T) {
	s, _ := source(t)
	var names []string
	for _, f := range s.List() {
		names = append(names, f.Name)
	}
	want := "taskmanager.log,runner-" + jobID + ".log,runner-" + jobID + ".out"
	if got := strings.Join(names, ","); got != want {
		t.Fatalf("List = %s, want %s", got, want)
	}
	if f, err := s.Lookup("runner-" + jobID + ".out"); err != nil || f.Size != int64(len("printed\n")) {
		t.Fatalf("Lookup = %+v, %v", f, err)
	}
	for _, bad := range []string{"../secret", "secret", "..", ".", "/etc/passwd", "a/b", "runner-" + jobID + ".err", "", "%2e%2e"} {
		if _, err := s.Lookup(bad); err == nil {
			t.Errorf("Lookup(%q) succeeded", bad)
		} else if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrInvalid) {
			t.Errorf("Lookup(%q) = %v", bad, err)
		}
	}
	if got := (Source{}).List(); len(got) != 0 {
		t.Fatalf("empty source lists %v", got)
	}
}

func TestRanges(t *testing.T) {
	s, _ := source(t)
	f, _ := s.Lookup(TaskManagerLog)
	read := func(q string) string {
		t.Helper()
		v, _ := url.ParseQuery(q)
		r, err := ParseRange(v)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if _, _, err := Copy(&b, f.Path(), r); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	for q, want := range map[string]string{
		"":                   "one\ntwo\nthree\n",
		"tail=1":             "three\n",
		"tail=2":             "two\nthree\n",
		"tail=9":             "one\ntwo\nthree\n",
		"offset=4":           "two\nthree\n",
		"offset=4&length=3":  "two",
		"offset=99":          "",
		"offset=0&length=99": "one\ntwo\nthree\n",
	} {
		if got := read(q); got != want {
			t.Errorf("%q: got %q, want %q", q, got, want)
		}
	}
	for _, bad := range []string{"tail=-1", "offset=x", "tail=2&offset=1", "length=-3"} {
		v, _ := url.ParseQuery(bad)
		if _, err := ParseRange(v); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseRange(%q) = %v", bad, err)
		}
	}
	// A last line without a newline is a line.
	p := filepath.Join(t.TempDir(), "x")
	_ = os.WriteFile(p, []byte("a\nb\nc"), 0o644)
	var b bytes.Buffer
	if _, _, err := Copy(&b, p, Range{Tail: 2}); err != nil || b.String() != "b\nc" {
		t.Fatalf("tail of unterminated file = %q, %v", b.String(), err)
	}
}

func TestArchiveRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, _ := source(t)
	root := t.TempDir()
	a := NewArchive(storage.Local(), root)
	tm, err := TaskManagerProcess("taskmanager-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := TaskManagerProcess("../x"); err == nil {
		t.Fatal("TaskManagerProcess accepted ../x")
	}
	if err := a.Put(ctx, tm, s.List()); err != nil {
		t.Fatal(err)
	}
	// Unchanged files are skipped, grown ones copied again.
	if err := os.WriteFile(filepath.Join(s.RunnerDir, jobID, RunnerOutFile), []byte("printed\nmore\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := a.Put(ctx, tm, s.List()); err != nil {
		t.Fatal(err)
	}
	procs, err := a.Processes(ctx)
	if err != nil || len(procs) != 1 || procs[0] != tm || procs[0].TaskManagerID() != "taskmanager-1" {
		t.Fatalf("Processes = %v, %v", procs, err)
	}
	files, err := a.List(ctx, tm)
	if err != nil || len(files) != 3 {
		t.Fatalf("List = %v, %v", files, err)
	}
	r, err := a.Open(ctx, tm, "runner-"+jobID+".out")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r)
	r.Close()
	if string(b) != "printed\nmore\n" {
		t.Fatalf("archived stdout = %q", b)
	}
	if _, err := a.Open(ctx, tm, "nope.log"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Open(missing) = %v", err)
	}
	if _, err := a.Open(ctx, tm, "../../x"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Open(../../x) = %v", err)
	}
}

// TestArchiveSkipsWhatAnotherArchived: a second Archive (the JobManager's
// or the client's after a TaskManager archived its own logs) does not copy
// a file again whose archived copy has its size and is no older; a file
// rewritten since (same size, newer) is copied again.
func TestArchiveSkipsWhatAnotherArchived(t *testing.T) {
	ctx := context.Background()
	s, _ := source(t)
	root := t.TempDir()
	tm, _ := TaskManagerProcess("taskmanager-1")
	if err := NewArchive(storage.Local(), root).Put(ctx, tm, s.List()); err != nil {
		t.Fatal(err)
	}
	// Mark the archived copy: a skipped file keeps the mark.
	copyPath := filepath.Join(root, string(tm), TaskManagerLog)
	marked := []byte("ONE\nTWO\nTHREE\n") // the source's size
	if err := os.WriteFile(copyPath, marked, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := NewArchive(storage.Local(), root).Put(ctx, tm, s.List()); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(copyPath); !bytes.Equal(b, marked) {
		t.Fatalf("an archived file of the same size was copied again: %q", b)
	}
	// The source rewritten after the copy (same size): copied.
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(copyPath, old, old); err != nil {
		t.Fatal(err)
	}
	if err := NewArchive(storage.Local(), root).Put(ctx, tm, s.List()); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(copyPath); string(b) != "one\ntwo\nthree\n" {
		t.Fatalf("a file changed after its archived copy was not copied again: %q", b)
	}
}
