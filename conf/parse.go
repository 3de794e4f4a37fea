package conf

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// durationUnits follows Flink's TimeUtils spellings, plus "us" and the Greek mu
// because people type those.
var durationUnits = map[string]time.Duration{
	"ns": time.Nanosecond, "nano": time.Nanosecond, "nanos": time.Nanosecond,
	"nanosecond": time.Nanosecond, "nanoseconds": time.Nanosecond,
	"us": time.Microsecond, "µs": time.Microsecond, "μs": time.Microsecond,
	"micro": time.Microsecond, "micros": time.Microsecond,
	"microsecond": time.Microsecond, "microseconds": time.Microsecond,
	"ms": time.Millisecond, "milli": time.Millisecond, "millis": time.Millisecond,
	"millisecond": time.Millisecond, "milliseconds": time.Millisecond,
	"s": time.Second, "sec": time.Second, "secs": time.Second,
	"second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute,
	"minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
}

const durationHint = `(expected e.g. "10 s", "500 ms", "1 min")`

// ParseDuration parses a duration the way Flink does: a non-negative integer
// and an optional unit, with or without a space ("10 s", "10s", "1 min").
// A plain integer means milliseconds. Go syntax ("1m30s", "1.5s") is accepted
// too, as a convenience for Go users.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	num, unit := splitNumber(t)
	if num == "" {
		return goDuration(s, t)
	}
	mult, ok := time.Millisecond, true
	if unit != "" {
		mult, ok = durationUnits[strings.ToLower(unit)]
	}
	if !ok {
		if d, err := goDuration(s, t); err == nil {
			return d, nil
		}
		return 0, fmt.Errorf("%q has unknown time unit %q (expected ns, us, ms, s, min, h or d)", s, unit)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > math.MaxInt64/int64(mult) {
		return 0, fmt.Errorf("%q is too large for a duration (at most about 292 years)", s)
	}
	return time.Duration(n) * mult, nil
}

func goDuration(orig, t string) (time.Duration, error) {
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration %s", orig, durationHint)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative; durations must be >= 0", orig)
	}
	return d, nil
}

// FormatDuration renders d in the largest unit that represents it exactly,
// in the form ParseDuration reads ("10 s", "5 min", "1500 ms").
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0 ms"
	}
	for _, u := range []struct {
		name string
		d    time.Duration
	}{{"d", 24 * time.Hour}, {"h", time.Hour}, {"min", time.Minute}, {"s", time.Second},
		{"ms", time.Millisecond}, {"us", time.Microsecond}} {
		if d%u.d == 0 {
			return fmt.Sprintf("%d %s", d/u.d, u.name)
		}
	}
	return fmt.Sprintf("%d ns", int64(d))
}

// MemorySize is a number of bytes. It prints in the largest binary unit that
// represents it exactly, as Flink's MemorySize does ("64 mb").
type MemorySize int64

// Common sizes; Flink's units are binary (1 kb = 1024 bytes).
const (
	Byte     MemorySize = 1
	Kibibyte            = 1024 * Byte
	Mebibyte            = 1024 * Kibibyte
	Gibibyte            = 1024 * Mebibyte
	Tebibyte            = 1024 * Gibibyte
)

var memoryUnits = map[string]MemorySize{
	"b": Byte, "bytes": Byte,
	"k": Kibibyte, "kb": Kibibyte, "kib": Kibibyte, "kibibytes": Kibibyte,
	"m": Mebibyte, "mb": Mebibyte, "mib": Mebibyte, "mebibytes": Mebibyte,
	"g": Gibibyte, "gb": Gibibyte, "gib": Gibibyte, "gibibytes": Gibibyte,
	"t": Tebibyte, "tb": Tebibyte, "tib": Tebibyte, "tebibytes": Tebibyte,
}

// Bytes returns the size in bytes.
func (m MemorySize) Bytes() int64 { return int64(m) }

func (m MemorySize) String() string {
	if m == 0 {
		return "0 bytes"
	}
	for _, u := range []struct {
		name string
		m    MemorySize
	}{{"tb", Tebibyte}, {"gb", Gibibyte}, {"mb", Mebibyte}, {"kb", Kibibyte}} {
		if m%u.m == 0 {
			return fmt.Sprintf("%d %s", m/u.m, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", int64(m))
}

// ParseMemorySize parses "64 mb", "1g", "32kb" or a plain number of bytes.
func ParseMemorySize(s string) (MemorySize, error) {
	num, unit := splitNumber(strings.TrimSpace(s))
	if num == "" {
		return 0, fmt.Errorf("%q is not a memory size (expected e.g. \"64 mb\", \"1 gb\", \"512 kb\" or bytes)", s)
	}
	mult, ok := Byte, true
	if unit != "" {
		mult, ok = memoryUnits[strings.ToLower(unit)]
	}
	if !ok {
		return 0, fmt.Errorf("%q has unknown memory unit %q (expected b, kb, mb, gb or tb)", s, unit)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > math.MaxInt64/int64(mult) {
		return 0, fmt.Errorf("%q is too large for a memory size", s)
	}
	return MemorySize(n) * mult, nil
}

// splitNumber splits "10 s" into "10" and "s". num is empty if t does not
// start with a digit.
func splitNumber(t string) (num, unit string) {
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	return t[:i], strings.TrimLeftFunc(t[i:], unicode.IsSpace)
}

func parseString(s string) (string, error) { return s, nil }

func parseInt(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", s)
	}
	return n, nil
}

func parseFloat(s string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a number (expected e.g. 1.5)", s)
	}
	return f, nil
}

// parseBool accepts only true and false, like Flink: "yes" or "1" are more
// likely mistakes than intent.
func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%q is not a boolean (expected true or false)", s)
}

func formatString(s string) string     { return s }
func formatInt(n int) string           { return strconv.Itoa(n) }
func formatFloat(f float64) string     { return strconv.FormatFloat(f, 'g', -1, 64) }
func formatBool(b bool) string         { return strconv.FormatBool(b) }
func formatMemory(m MemorySize) string { return m.String() }
