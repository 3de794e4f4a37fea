package logging

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
)

// ErrUnknownLevel is returned for a level outside Levels.
var ErrUnknownLevel = errors.New("logging: unknown level")

// Levels are the accepted level names, matching the log.level option.
var Levels = []string{"trace", "debug", "info", "warn", "error"}

// TimeFormat is the events' timestamp format: RFC 3339 in milliseconds,
// the precision of Flink's log4j pattern, which start-up and shutdown
// timelines need (whole seconds hide them).
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// zerolog's timestamp format is process-wide: every process that logs
// imports this package.
func init() { zerolog.TimeFieldFormat = TimeFormat }

// New returns a logger writing to w at level (case-insensitive, one of
// Levels). Events carry a timestamp. Output is a readable console format if w
// is a terminal, JSON otherwise.
func New(w io.Writer, level string) (zerolog.Logger, error) {
	return newLogger(w, level, isTerminal(w))
}

func newLogger(w io.Writer, level string, console bool) (zerolog.Logger, error) {
	lvl, err := ParseLevel(level)
	if err != nil {
		return zerolog.Nop(), err
	}
	if console {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: TimeFormat}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

// ParseLevel maps a level name to zerolog's level.
func ParseLevel(level string) (zerolog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(level)) {
	case "trace":
		return zerolog.TraceLevel, nil
	case "debug":
		return zerolog.DebugLevel, nil
	case "info":
		return zerolog.InfoLevel, nil
	case "warn":
		return zerolog.WarnLevel, nil
	case "error":
		return zerolog.ErrorLevel, nil
	}
	return zerolog.NoLevel, fmt.Errorf("%w %q (expected one of %s)", ErrUnknownLevel, level, strings.Join(Levels, ", "))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}
