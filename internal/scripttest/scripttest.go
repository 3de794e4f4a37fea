// Package scripttest runs scenario scripts for the pure state machines
// (the scheduler, the checkpoint coordinator): a script is a list of
// commands, and the lines starting with "> " after a command are exactly
// what the command must produce. With -update the expected lines are
// rewritten from what the commands produce.
package scripttest

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the expected output in testdata scripts")

// Run runs every script matching glob as a subtest; newExec starts a fresh
// interpreter per script, whose exec runs one command (blank lines and
// "#" comments are skipped) and returns its output lines.
func Run(t *testing.T, glob string, newExec func(t *testing.T) func(cmd string) []string) {
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts match %s: %v", glob, err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f, newExec(t)) })
	}
}

func runScript(t *testing.T, path string, exec func(string) []string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	failed := false
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(line, ">") {
			continue
		}
		out = append(out, line)
		cmd := strings.TrimSpace(line)
		if cmd == "" || strings.HasPrefix(cmd, "#") {
			continue
		}
		got := exec(cmd)
		var want []string
		for j := i + 1; j < len(lines) && strings.HasPrefix(lines[j], ">"); j++ {
			want = append(want, strings.TrimPrefix(strings.TrimPrefix(lines[j], ">"), " "))
		}
		for _, g := range got {
			out = append(out, "> "+g)
		}
		if !*update && strings.Join(got, "\n") != strings.Join(want, "\n") {
			failed = true
			t.Errorf("%s:%d: %s\n got:\n  %s\nwant:\n  %s", path, i+1, cmd, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	}
	if *update && !failed {
		if err := os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
