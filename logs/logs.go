package logs

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gofl/gofl/internal/ids"
)

// EnvLogFile names the file a process's stdout and stderr go to; providers
// set it for the processes they start (Flink's log.file).
const EnvLogFile = "GOFL_LOG_FILE"

// Names of a process's log files.
const (
	JobManagerLog  = "jobmanager.log"
	TaskManagerLog = "taskmanager.log"
	// RunnerPrefix starts every runner log's name: runner-<job-id>.<ext>.
	RunnerPrefix = "runner-"
)

// Runner log files in a runner's directory (<work dir>/jobs/<job-id>/).
const (
	RunnerLogFile = "runner.log" // stdout and stderr, interleaved
	RunnerOutFile = "runner.out" // stdout: the job's Print()
	RunnerErrFile = "runner.err" // stderr: the runner's own log, panics
)

// runnerExts maps a runner file in its directory to its published extension.
var runnerExts = []struct{ file, ext string }{{RunnerLogFile, ".log"}, {RunnerOutFile, ".out"}, {RunnerErrFile, ".err"}}

// ErrNotFound is a log name the source does not have.
var ErrNotFound = errors.New("logs: no such log")

// ErrInvalid is a malformed name or range.
var ErrInvalid = errors.New("logs: invalid")

// File is one log file, as Flink's LogInfo ({name, size, mtime}).
type File struct {
	Name  string `json:"name"`
	Size  int64  `json:"size"`
	MTime int64  `json:"mtime"` // epoch millis
	path  string
}

// RunnerLogName is the published name of a runner file of jobID with ext
// (".log", ".out" or ".err").
func RunnerLogName(jobID, ext string) string { return RunnerPrefix + jobID + ext }

// CheckName checks a log name from the network: identifier syntax, no
// path separators, no leading dot.
func CheckName(name string) error {
	if err := ids.Name("log name", name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// Source is the log files of one running process. The zero value has
// none. Safe for concurrent use; it reads the disk on every call.
type Source struct {
	// Own is the path of the process's own log file (GOFL_LOG_FILE);
	// empty: none.
	Own string
	// OwnName is the name Own is published under (JobManagerLog, TaskManagerLog).
	OwnName string
	// RunnerDir is <work dir>/jobs of a TaskManager, holding one directory
	// per job with its runner files; empty: none.
	RunnerDir string
}

// List lists the files that exist, the own log first, then runner logs by
// name. It never fails for a missing file or directory.
func (s Source) List() []File {
	var out []File
	if s.Own != "" {
		if f, ok := stat(s.Own, s.OwnName); ok {
			out = append(out, f)
		}
	}
	if s.RunnerDir == "" {
		return out
	}
	ents, _ := os.ReadDir(s.RunnerDir)
	var runners []File
	for _, e := range ents {
		if !e.IsDir() || ids.JobID("job id", e.Name()) != nil {
			continue
		}
		for _, r := range runnerExts {
			if f, ok := stat(filepath.Join(s.RunnerDir, e.Name(), r.file), RunnerLogName(e.Name(), r.ext)); ok {
				runners = append(runners, f)
			}
		}
	}
	slices.SortFunc(runners, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	return append(out, runners...)
}

func stat(p, name string) (File, bool) {
	st, err := os.Stat(p)
	if err != nil || !st.Mode().IsRegular() {
		return File{}, false
	}
	return File{Name: name, Size: st.Size(), MTime: st.ModTime().UnixMilli(), path: p}, true
}

// Lookup finds a listed file by name. Only listed names resolve, so a name
// can never reach a path outside the source's files.
func (s Source) Lookup(name string) (File, error) {
	if err := CheckName(name); err != nil {
		return File{}, err
	}
	for _, f := range s.List() {
		if f.Name == name {
			return f, nil
		}
	}
	return File{}, fmt.Errorf("%w: %s", ErrNotFound, name)
}

// Path is where a listed file is on disk.
func (f File) Path() string { return f.path }

// Range selects part of a log: Tail lines from its end, or Length bytes
// (0: to the end) from Offset. The zero Range is the whole file.
type Range struct {
	Offset int64
	Length int64
	Tail   int
}

// MaxTailLines bounds Range.Tail.
const MaxTailLines = 1_000_000

// ParseRange reads ?offset=N&length=N or ?tail=N (lines).
func ParseRange(q url.Values) (Range, error) {
	var r Range
	num := func(key string, max int64) (int64, error) {
		s := q.Get(key)
		if s == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 || n > max {
			return 0, fmt.Errorf("%w: %s=%q (want 0..%d)", ErrInvalid, key, s, max)
		}
		return n, nil
	}
	var err error
	if r.Offset, err = num("offset", 1<<62); err != nil {
		return Range{}, err
	}
	if r.Length, err = num("length", 1<<62); err != nil {
		return Range{}, err
	}
	t, err := num("tail", MaxTailLines)
	if err != nil {
		return Range{}, err
	}
	r.Tail = int(t)
	if r.Tail > 0 && (r.Offset > 0 || r.Length > 0) {
		return Range{}, fmt.Errorf("%w: tail and offset/length exclude each other", ErrInvalid)
	}
	return r, nil
}

// Query is r as URL query parameters (empty for the whole file).
func (r Range) Query() url.Values {
	q := url.Values{}
	if r.Tail > 0 {
		q.Set("tail", strconv.Itoa(r.Tail))
	}
	if r.Offset > 0 {
		q.Set("offset", strconv.FormatInt(r.Offset, 10))
	}
	if r.Length > 0 {
		q.Set("length", strconv.FormatInt(r.Length, 10))
	}
	return q
}

// Bounds resolves r on a file of size bytes readable through ra: the
// first byte and the count. An offset past the end gives (size, 0), so a
// follower polling with its last offset just gets nothing new.
func (r Range) Bounds(ra io.ReaderAt, size int64) (start, n int64, err error) {
	if r.Tail > 0 {
		start, err = tailStart(ra, size, r.Tail)
		return start, size - start, err
	}
	start = min(r.Offset, size)
	n = size - start
	if r.Length > 0 {
		n = min(n, r.Length)
	}
	return start, n, nil
}

// tailStart finds where the last lines of a file start, reading backwards
// in blocks. A final line without a newline counts as a line.
func tailStart(ra io.ReaderAt, size int64, lines int) (int64, error) {
	const block = 64 << 10
	buf := make([]byte, block)
	end := size
	seen := 0
	for end > 0 {
		start := max(end-block, 0)
		b := buf[:end-start]
		if _, err := ra.ReadAt(b, start); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] != '\n' || start+int64(i) == size-1 {
				continue
			}
			seen++
			if seen == lines {
				return start + int64(i) + 1, nil
			}
		}
		end = start
	}
	return 0, nil
}

// Copy writes the part of the file at p that r selects to w and returns
// the file's size at open and the bytes written.
func Copy(w io.Writer, p string, r Range) (size, written int64, err error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	size = st.Size()
	start, n, err := r.Bounds(f, size)
	if err != nil {
		return size, 0, err
	}
	written, err = io.Copy(w, io.NewSectionReader(f, start, n))
	return size, written, err
}

// IsRunnerLogOf reports whether name is one of jobID's runner logs.
func IsRunnerLogOf(name, jobID string) bool {
	for _, r := range runnerExts {
		if name == RunnerLogName(jobID, r.ext) {
			return true
		}
	}
	return false
}
