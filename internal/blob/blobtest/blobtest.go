//go:build linux

// Package blobtest helps the tests of the digest cache's users
// (blob.DigestCache): how much a process read, and files whose last
// change the file system's clock has passed.
package blobtest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gofl/gofl/internal/blob"
)

// ReadBytes is how many bytes this process read so far (rchar).
func ReadBytes(t testing.TB) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Fatalf("blobtest: no /proc/self/io: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "rchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	t.Fatal("blobtest: no rchar in /proc/self/io")
	return 0
}

// WriteSettled writes data to p and waits until the file system's clock
// passed the file's last change, as it has for a binary built earlier: a
// digest read in the tick of the change is not remembered.
func WriteSettled(t testing.TB, p string, data []byte) {
	t.Helper()
	if err := os.WriteFile(p, data, 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	changed := max(sys.Mtim.Nano(), sys.Ctim.Nano())
	for deadline := time.Now().Add(10 * time.Second); ; {
		now, err := blob.FileSystemNow(filepath.Dir(p))
		if err != nil {
			t.Fatal(err)
		}
		if changed < now.UnixNano() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("blobtest: the file system's clock did not move past the file's change")
		}
	}
}
