package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestJSONWhenNotATerminal(t *testing.T) {
	var buf bytes.Buffer
	log, err := New(&buf, "info")
	if err != nil {
		t.Fatal(err)
	}
	log.Info().Str("component", "test").Msg("hello")
	var ev map[string]any
	if err := json.Unmarshal(buf.Bytes(), &ev); err != nil {
		t.Fatalf("output is not JSON: %q: %v", buf.String(), err)
	}
	if ev["level"] != "info" || ev["message"] != "hello" || ev["component"] != "test" {
		t.Errorf("event = %v", ev)
	}
	ts, ok := ev["time"].(string)
	if !ok {
		t.Fatalf("no timestamp in %v", ev)
	}
	// Milliseconds, as Flink's log lines have them.
	if _, err := time.Parse(TimeFormat, ts); err != nil {
		t.Errorf("timestamp %q: %v", ts, err)
	}
}

func TestLevelFilters(t *testing.T) {
	for _, tc := range []struct {
		level string
		want  []string
	}{
		{"trace", []string{"trace", "debug", "info", "warn", "error"}},
		{"debug", []string{"debug", "info", "warn", "error"}},
		{"INFO", []string{"info", "warn", "error"}},
		{"warn", []string{"warn", "error"}},
		{"error", []string{"error"}},
	} {
		var buf bytes.Buffer
		log, err := New(&buf, tc.level)
		if err != nil {
			t.Fatal(err)
		}
		log.Trace().Msg("m")
		log.Debug().Msg("m")
		log.Info().Msg("m")
		log.Warn().Msg("m")
		log.Error().Msg("m")
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			var ev struct{ Level string }
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				t.Fatal(err)
			}
			got = append(got, ev.Level)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("level %s logged %v; want %v", tc.level, got, tc.want)
		}
	}
}

func TestUnknownLevel(t *testing.T) {
	_, err := New(&bytes.Buffer{}, "verbose")
	if !errors.Is(err, ErrUnknownLevel) || !strings.Contains(err.Error(), `"verbose"`) ||
		!strings.Contains(err.Error(), "trace, debug, info, warn, error") {
		t.Errorf("err = %v", err)
	}
}

func TestConsoleFormat(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger(&buf, "info", true)
	if err != nil {
		t.Fatal(err)
	}
	log.Info().Str("job", "wordcount").Msg("started")
	out := regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(buf.String(), "")
	if strings.HasPrefix(out, "{") || !strings.Contains(out, "started") || !strings.Contains(out, "job=wordcount") {
		t.Errorf("console output = %q", out)
	}
}

func TestIsTerminal(t *testing.T) {
	if isTerminal(&bytes.Buffer{}) {
		t.Errorf("a buffer is not a terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Errorf("a regular file is not a terminal")
	}
}
