package conf

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
)

// Sentinel errors. Returned errors wrap them; test with errors.Is.
var (
	// ErrInvalid wraps every *ValidationError.
	ErrInvalid = errors.New("conf: invalid configuration")
	// ErrUnknownKey is returned by Configuration.Set for unregistered keys.
	ErrUnknownKey = errors.New("conf: unknown key")
	// ErrMalformedYAML is returned when a config file is not valid YAML or
	// not a mapping of keys to values.
	ErrMalformedYAML = errors.New("conf: malformed YAML")
	// ErrConfigFile is returned when an explicitly named config file cannot
	// be read.
	ErrConfigFile = errors.New("conf: cannot read config file")
)

// SourceKind says where a value came from.
type SourceKind int

// Source kinds, lowest precedence first (CodeSource aside, which is whatever
// the caller sets last).
const (
	SourceDefault SourceKind = iota
	SourceFile
	SourceEnv
	SourceDynamic // -D key=value
	SourceFlag    // a dedicated CLI flag such as --log-level
	SourceCode    // Configuration.Set from Go code
)

// Source is where a value came from: the default, a file (path and line),
// an environment variable, a -D flag, a dedicated flag or code.
type Source struct {
	Kind SourceKind
	Name string // file path, env var or flag name; empty otherwise
	Line int    // line in the file, 0 if unknown
}

// Sources without a name.
var (
	DefaultSource = Source{Kind: SourceDefault}
	DynamicSource = Source{Kind: SourceDynamic}
	CodeSource    = Source{Kind: SourceCode}
)

// FileSource is a value read from path at line (0 if unknown).
func FileSource(path string, line int) Source {
	return Source{Kind: SourceFile, Name: path, Line: line}
}

// EnvSource is a value read from environment variable name.
func EnvSource(name string) Source { return Source{Kind: SourceEnv, Name: name} }

// FlagSource is a value set by a dedicated command-line flag, e.g. "--log-level".
func FlagSource(flag string) Source { return Source{Kind: SourceFlag, Name: flag} }

func (s Source) String() string {
	switch s.Kind {
	case SourceDefault:
		return "default"
	case SourceFile:
		if s.Line > 0 {
			return fmt.Sprintf("file %s:%d", s.Name, s.Line)
		}
		return "file " + s.Name
	case SourceEnv:
		return "env " + s.Name
	case SourceDynamic:
		return "-D"
	case SourceFlag:
		return "flag " + s.Name
	case SourceCode:
		return "code"
	}
	return fmt.Sprintf("source(%d)", int(s.Kind))
}

// Entry is one set key: what the user wrote, what it parsed to and where it
// came from. Value is nil for unknown keys.
type Entry struct {
	Key    string
	Raw    string
	Value  any
	Source Source
	Known  bool
}

// Configuration maps keys to validated values. Values of registered options
// are always valid; unknown keys (kept for forward compatibility, reported as
// warnings by Load) carry only their raw text. A Configuration is safe for
// concurrent use.
type Configuration struct {
	mu      sync.RWMutex
	entries map[string]Entry
}

// NewConfiguration returns an empty configuration: every option at its
// default.
func NewConfiguration() *Configuration {
	return &Configuration{entries: map[string]Entry{}}
}

// FromMap builds a configuration from key/value pairs with CodeSource, as
// tests do. Like Load, it reports every bad value and unknown key at once.
func FromMap(m map[string]string) (*Configuration, error) {
	c := NewConfiguration()
	var problems []Problem
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if err := c.Set(k, m[k], CodeSource); err != nil {
			var ve *ValidationError
			if errors.As(err, &ve) {
				problems = append(problems, ve.Problems...)
			} else {
				problems = append(problems, Problem{Key: k, Value: m[k], Source: CodeSource, Msg: "unknown key" + suggestion(k)})
			}
		}
	}
	problems = append(problems, crossCheck(c)...)
	if len(problems) > 0 {
		return nil, &ValidationError{Problems: problems}
	}
	return c, nil
}

// Set parses value for key and stores it with src, replacing any earlier
// value. An invalid value returns a *ValidationError (wrapping ErrInvalid) and
// leaves c unchanged; an unregistered key returns an error wrapping
// ErrUnknownKey with a suggestion. Cross-option rules (e.g. timeout >=
// interval) are checked by Validate, since single Sets arrive in any order.
func (c *Configuration) Set(key, value string, src Source) error {
	spec, ok := Lookup(key)
	if !ok {
		return fmt.Errorf("%w %q%s", ErrUnknownKey, key, suggestion(key))
	}
	v, err := spec.parse(value)
	if err != nil {
		return &ValidationError{Problems: []Problem{{Key: key, Value: value, Source: src, Msg: err.Error()}}}
	}
	c.put(Entry{Key: key, Raw: value, Value: v, Source: src, Known: true})
	return nil
}

func (c *Configuration) put(e Entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]Entry{}
	}
	c.entries[e.Key] = e
}

// Unset removes key, so the option reads as its default again.
func (c *Configuration) Unset(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, key)
}

// Lookup returns the entry for key if it was set.
func (c *Configuration) Lookup(key string) (Entry, bool) {
	if c == nil {
		return Entry{}, false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.entries[key]
	return e, ok
}

// IsSet reports whether key was set by any source other than the default.
func (c *Configuration) IsSet(key string) bool {
	_, ok := c.Lookup(key)
	return ok
}

// Keys returns the set keys, known and unknown, sorted.
func (c *Configuration) Keys() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Sorted(maps.Keys(c.entries))
}

// Clone returns an independent copy.
func (c *Configuration) Clone() *Configuration {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return &Configuration{entries: maps.Clone(c.entries)}
}

// Snapshot returns the raw text of every set key, e.g. to stage a config for
// a cluster. Loading the snapshot as a YAML file reproduces the values.
func (c *Configuration) Snapshot() map[string]string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make(map[string]string, len(c.entries))
	for k, e := range c.entries {
		out[k] = e.Raw
	}
	return out
}

// Setting is one option's effective value, for display.
type Setting struct {
	Spec   Spec
	Value  string // formatted effective value
	Source Source
}

// IsDefault reports whether the setting comes from the option's default.
func (s Setting) IsDefault() bool { return s.Source.Kind == SourceDefault }

// Masked stands for a secret's value in Settings.
const Masked = "******"

// Settings returns every registered option's effective value, sorted by key;
// a secret's value is Masked.
func (c *Configuration) Settings() []Setting {
	specs := Options()
	out := make([]Setting, 0, len(specs))
	for _, s := range specs {
		if e, ok := c.Lookup(s.Key()); ok && e.Known {
			v := s.format(e.Value)
			if s.IsSecret() && v != "" {
				v = Masked
			}
			out = append(out, Setting{Spec: s, Value: v, Source: e.Source})
			continue
		}
		out = append(out, Setting{Spec: s, Value: s.DefaultString(), Source: DefaultSource})
	}
	return out
}

// Validate checks the rules that span several options, such as
// heartbeat.timeout >= heartbeat.interval. Load and FromMap call it; code
// that builds a Configuration with Set may call it when done.
func (c *Configuration) Validate() error {
	if ps := crossCheck(c); len(ps) > 0 {
		return &ValidationError{Problems: ps}
	}
	return nil
}

// ExpandEnv expands $VAR and ${VAR} in s from the environment. Options such
// as staging.dir keep "$HOME" in the configuration and expand it where the
// path is used, so a config snapshot stays valid on another machine.
func ExpandEnv(s string) string { return os.ExpandEnv(s) }
