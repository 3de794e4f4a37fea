package runner

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A binary still open for writing cannot be executed (ETXTBSY); starting
// it retries until the writer closed it.
func TestStartRetriesWhileTheBinaryIsBusy(t *testing.T) {
	src, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "busy")
	w, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command(bin).Start(); err == nil {
		t.Fatal("exec of a file open for writing succeeded: this system does not report ETXTBSY")
	}
	// The writer closes the file when the second attempt is made: the first
	// one must have failed with ETXTBSY and been retried.
	attempts := 0
	cmd, err := startRetryingBusy(context.Background(), func() *exec.Cmd {
		if attempts++; attempts == 2 {
			w.Close()
		}
		return exec.Command(bin)
	})
	if err != nil {
		t.Fatal(err)
	}
	if attempts != 2 {
		t.Errorf("%d attempts, want 2: one busy, one after the close", attempts)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
}
