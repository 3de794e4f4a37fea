package conf

import (
	"fmt"
	"strings"
	"time"
)

// Problem is one invalid value. Msg names the value and what was expected,
// e.g. `"ten" is not a duration (expected e.g. "10 s", "500 ms", "1 min")`.
type Problem struct {
	Key    string // empty when the key itself could not be read, e.g. "-D foo"
	Value  string
	Source Source
	Msg    string
}

func (p Problem) String() string {
	var b strings.Builder
	if p.Key != "" {
		b.WriteString(p.Key)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	if p.Source.Kind != SourceDefault {
		fmt.Fprintf(&b, " [from %s]", p.Source)
	}
	return b.String()
}

// ValidationError lists every problem found, so users fix them all at once.
// It wraps ErrInvalid.
type ValidationError struct {
	Problems []Problem
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString(ErrInvalid.Error())
	if len(e.Problems) == 1 {
		b.WriteString(": ")
		b.WriteString(e.Problems[0].String())
		return b.String()
	}
	fmt.Fprintf(&b, " (%d problems):", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.String())
	}
	return b.String()
}

func (e *ValidationError) Unwrap() error { return ErrInvalid }

// Warning is something Load tolerated but the user should see, such as an
// unknown key.
type Warning struct {
	Key     string
	Source  Source
	Message string
}

func (w Warning) String() string {
	return fmt.Sprintf("%s [from %s]", w.Message, w.Source)
}

func unknownKeyWarning(key string, src Source) Warning {
	return Warning{Key: key, Source: src, Message: fmt.Sprintf("unknown key %q%s", key, suggestion(key))}
}

// suggestion returns ` (did you mean "k"?)` for the registered key nearest to
// key, or "" if none is close enough to be a plausible typo.
func suggestion(key string) string {
	best, bestDist := "", -1
	lk := strings.ToLower(key)
	for _, s := range Options() {
		d := levenshtein(lk, strings.ToLower(s.Key()))
		if bestDist < 0 || d < bestDist {
			best, bestDist = s.Key(), d
		}
	}
	if bestDist < 0 || bestDist > max(2, len([]rune(key))/3) {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// levenshtein is the edit distance between a and b, by runes.
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// minCheckpointInterval is Flink's lower bound for a checkpoint interval.
const minCheckpointInterval = 10 * time.Millisecond

// crossCheck applies the rules that involve more than one option. Problems
// are reported on the key the user most likely has to change.
func crossCheck(c *Configuration) []Problem {
	var ps []Problem
	report := func(key, msg string) {
		e, _ := c.Lookup(key)
		raw := e.Raw
		if !e.Known {
			spec, _ := Lookup(key)
			raw = spec.DefaultString()
		}
		ps = append(ps, Problem{Key: key, Value: raw, Source: e.Source, Msg: msg})
	}
	if hi, ht := HeartbeatInterval.Get(c), HeartbeatTimeout.Get(c); ht < hi {
		report(HeartbeatTimeout.Key(), fmt.Sprintf("%s must be at least heartbeat.interval (%s)",
			FormatDuration(ht), FormatDuration(hi)))
	}
	if ib, mb := ExponentialDelayInitialBackoff.Get(c), ExponentialDelayMaxBackoff.Get(c); mb < ib {
		report(ExponentialDelayMaxBackoff.Key(), fmt.Sprintf("%s must be at least %s (%s)",
			FormatDuration(mb), ExponentialDelayInitialBackoff.Key(), FormatDuration(ib)))
	}
	if ci := CheckpointingInterval.Get(c); ci > 0 && ci < minCheckpointInterval {
		report(CheckpointingInterval.Key(), fmt.Sprintf("%s is below the minimum of %s (use 0 to disable checkpointing)",
			FormatDuration(ci), FormatDuration(minCheckpointInterval)))
	}
	checkpointingProblems(c, report)
	haProblems(c, report)
	return ps
}
