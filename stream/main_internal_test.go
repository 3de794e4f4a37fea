package stream

import (
	"strings"
	"testing"
)

// A binary with several jobs names the unknown job it was given, not "name
// one", since the user did name one (issue 13, bug 6).
func TestSelectJobNamesAnUnknownJob(t *testing.T) {
	RegisterJob("select-test-a", func(*Environment, []string) error { return nil })
	RegisterJob("select-test-b", func(*Environment, []string) error { return nil })
	_, _, err := selectJob([]string{"wordcout", "--input", "x"})
	if err == nil || !strings.Contains(err.Error(), `unknown job "wordcout"`) || !strings.Contains(err.Error(), "select-test-a") ||
		strings.Contains(err.Error(), "name one") {
		t.Fatalf("selectJob(wordcout): %v", err)
	}
	if _, _, err := selectJob([]string{"--input", "x"}); err == nil || !strings.Contains(err.Error(), "name one as the first argument") {
		t.Fatalf("selectJob without a name: %v", err)
	}
	if name, rest, err := selectJob([]string{"select-test-b", "x"}); err != nil || name != "select-test-b" || len(rest) != 1 {
		t.Fatalf("selectJob(select-test-b) = %q, %q, %v", name, rest, err)
	}
}
