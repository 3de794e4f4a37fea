package conf

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestMarkdownReference(t *testing.T) {
	md := MarkdownReference()
	lines := strings.Split(strings.TrimSuffix(md, "\n"), "\n")
	if len(lines) != len(Options())+2 {
		t.Fatalf("%d lines for %d options", len(lines), len(Options()))
	}
	for _, want := range []string{
		"| `heartbeat.interval` | Duration | `10 s` |",
		"| `blob.offload.minsize` | MemorySize | `1 mb` |",
		"| `restart-strategy.type` | Enum | (none) |",
		"Values: `region`, `full`.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("reference lacks %q", want)
		}
	}
	for i, l := range lines {
		// Four columns: five unescaped pipes.
		if n := strings.Count(l, "|") - strings.Count(l, `\|`); n != 5 {
			t.Errorf("line %d has %d column separators: %s", i, n, l)
		}
	}
}

func TestReplaceGenerated(t *testing.T) {
	doc := "intro\n" + BeginGeneratedMarker + "\nold\n" + EndGeneratedMarker + "\nouttro\n"
	got, err := ReplaceGenerated(doc, "new\n")
	want := "intro\n" + BeginGeneratedMarker + "\nnew\n" + EndGeneratedMarker + "\nouttro\n"
	if err != nil || got != want {
		t.Errorf("ReplaceGenerated = %q, %v", got, err)
	}
	if _, err := ReplaceGenerated("no markers", "x"); !errors.Is(err, ErrNoMarkers) {
		t.Errorf("err = %v", err)
	}
}

// TestReadmeReferenceUpToDate keeps README.md's configuration table in sync
// with the registered options.
func TestReadmeReferenceUpToDate(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := ReplaceGenerated(string(readme), MarkdownReference())
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	if string(readme) != want {
		t.Errorf("README.md's configuration reference is out of date; run `make docs` " +
			"(or `go run ./cmd/gofl config docs --update-readme`) and commit the result")
	}
}
