package conf

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Type names an option's value type as shown in docs and `gofl config`.
type Type string

// The option types. The names match Flink's documentation.
const (
	TypeString     Type = "String"
	TypeInt        Type = "Integer"
	TypeBool       Type = "Boolean"
	TypeFloat      Type = "Float"
	TypeDuration   Type = "Duration"
	TypeMemorySize Type = "MemorySize"
	TypeEnum       Type = "Enum"
)

// Spec is the type-erased view of an option that the registry, loader,
// `gofl config` and the docs generator work with. Only *Option[T] implements
// it.
type Spec interface {
	Key() string
	Type() Type
	Description() string
	// DefaultString is the default in the syntax the parser reads back.
	DefaultString() string
	// Allowed lists the values of an enum option; nil for other types.
	Allowed() []string
	// EnvVar is the environment variable that sets this option.
	EnvVar() string
	// IsSecret reports a secret (token, password): shown masked wherever
	// settings are printed (gofl config) and never logged.
	IsSecret() bool

	// parse checks raw and returns the parsed (and, for enums, normalized)
	// value, or an error that names the value and what was expected.
	parse(raw string) (any, error)
	format(v any) string
}

// Option is one typed configuration option. Options are created once, as
// package variables, by the constructors below, which also register them.
type Option[T any] struct {
	key     string
	typ     Type
	def     T
	desc    string
	allowed []string
	aliases map[string]string
	parseFn func(string) (T, error)
	fmtFn   func(T) string
	checks  []func(T) error
	secret  bool
}

// AsSecret marks the option as holding a secret; see Spec.IsSecret.
func (o *Option[T]) AsSecret() *Option[T] {
	o.secret = true
	return o
}

// IsSecret implements Spec.
func (o *Option[T]) IsSecret() bool { return o.secret }

// Key returns the option's key, e.g. "heartbeat.interval".
func (o *Option[T]) Key() string { return o.key }

// Type returns the option's value type.
func (o *Option[T]) Type() Type { return o.typ }

// Description returns the one-line description used in docs.
func (o *Option[T]) Description() string { return o.desc }

// Default returns the value used when the key is not set.
func (o *Option[T]) Default() T { return o.def }

// DefaultString returns the default formatted as the parser reads it.
func (o *Option[T]) DefaultString() string { return o.fmtFn(o.def) }

// Allowed returns an enum option's values (aliases excluded); nil otherwise.
func (o *Option[T]) Allowed() []string { return slices.Clone(o.allowed) }

// EnvVar returns the environment variable that sets this option.
func (o *Option[T]) EnvVar() string { return EnvVar(o.key) }

// Get returns the option's value in c, or its default if c is nil or the key
// is unset. It never fails: values are validated when they enter c.
func (o *Option[T]) Get(c *Configuration) T {
	if c == nil {
		return o.def
	}
	e, ok := c.Lookup(o.key)
	if !ok {
		return o.def
	}
	if v, ok := e.Value.(T); ok {
		return v
	}
	return o.def
}

// Set stores v in c with CodeSource. It fails if v breaks the option's range
// checks (e.g. zero task slots).
func (o *Option[T]) Set(c *Configuration, v T) error {
	return c.Set(o.key, o.fmtFn(v), CodeSource)
}

// Parse parses raw as this option would when loading, including range checks.
func (o *Option[T]) Parse(raw string) (T, error) {
	v, err := o.parseFn(raw)
	if err != nil {
		return v, err
	}
	for _, check := range o.checks {
		if err := check(v); err != nil {
			return v, fmt.Errorf("%q %w", raw, err)
		}
	}
	return v, nil
}

// WithCheck adds a range check, run after parsing. The error text completes
// the sentence `"<value>" ...`, e.g. "must be at least 1". WithCheck panics if
// the default fails the check, since that is a bug in the option's definition.
func (o *Option[T]) WithCheck(check func(T) error) *Option[T] {
	if err := check(o.def); err != nil {
		panic(fmt.Sprintf("conf: default of %s fails its own check: %v", o.key, err))
	}
	o.checks = append(o.checks, check)
	return o
}

// WithAliases maps alternative spellings of an enum's values to the
// canonical ones; matching is case-insensitive like the values themselves.
func (o *Option[T]) WithAliases(aliases map[string]string) *Option[T] {
	if o.typ != TypeEnum {
		panic("conf: WithAliases on non-enum option " + o.key)
	}
	if o.aliases == nil {
		o.aliases = map[string]string{}
	}
	for alias, canonical := range aliases {
		if !slices.Contains(o.allowed, canonical) {
			panic(fmt.Sprintf("conf: alias %q of %s maps to unknown value %q", alias, o.key, canonical))
		}
		o.aliases[strings.ToLower(alias)] = canonical
	}
	return o
}

func (o *Option[T]) parse(raw string) (any, error) { return o.Parse(raw) }

func (o *Option[T]) format(v any) string {
	if t, ok := v.(T); ok {
		return o.fmtFn(t)
	}
	return fmt.Sprint(v)
}

// Get is the free-function form of opt.Get(cfg).
func Get[T any](c *Configuration, opt *Option[T]) T { return opt.Get(c) }

// StringOption defines and registers a string option.
func StringOption(key, def, desc string) *Option[string] {
	return register(&Option[string]{key: key, typ: TypeString, def: def, desc: desc,
		parseFn: parseString, fmtFn: formatString})
}

// IntOption defines and registers an integer option.
func IntOption(key string, def int, desc string) *Option[int] {
	return register(&Option[int]{key: key, typ: TypeInt, def: def, desc: desc,
		parseFn: parseInt, fmtFn: formatInt})
}

// BoolOption defines and registers a boolean option (true or false).
func BoolOption(key string, def bool, desc string) *Option[bool] {
	return register(&Option[bool]{key: key, typ: TypeBool, def: def, desc: desc,
		parseFn: parseBool, fmtFn: formatBool})
}

// FloatOption defines and registers a floating-point option.
func FloatOption(key string, def float64, desc string) *Option[float64] {
	return register(&Option[float64]{key: key, typ: TypeFloat, def: def, desc: desc,
		parseFn: parseFloat, fmtFn: formatFloat})
}

// DurationOption defines and registers a duration option; see ParseDuration.
func DurationOption(key string, def time.Duration, desc string) *Option[time.Duration] {
	return register(&Option[time.Duration]{key: key, typ: TypeDuration, def: def, desc: desc,
		parseFn: ParseDuration, fmtFn: FormatDuration})
}

// MemorySizeOption defines and registers a memory size option; see
// ParseMemorySize.
func MemorySizeOption(key string, def MemorySize, desc string) *Option[MemorySize] {
	return register(&Option[MemorySize]{key: key, typ: TypeMemorySize, def: def, desc: desc,
		parseFn: ParseMemorySize, fmtFn: formatMemory})
}

// EnumOption defines and registers an option whose value is one of allowed,
// matched case-insensitively and stored in its canonical spelling. An empty
// default means "derived from other options"; then "" is also accepted.
func EnumOption(key, def string, allowed []string, desc string) *Option[string] {
	o := &Option[string]{key: key, typ: TypeEnum, def: def, desc: desc,
		allowed: slices.Clone(allowed), fmtFn: formatString}
	if def != "" && !slices.Contains(allowed, def) {
		panic(fmt.Sprintf("conf: default %q of %s is not among %v", def, key, allowed))
	}
	o.parseFn = func(raw string) (string, error) {
		v := strings.ToLower(strings.TrimSpace(raw))
		if v == "" && def == "" {
			return "", nil
		}
		for _, a := range o.allowed {
			if strings.ToLower(a) == v {
				return a, nil
			}
		}
		if c, ok := o.aliases[v]; ok {
			return c, nil
		}
		return "", fmt.Errorf("%q is not one of %s", raw, strings.Join(o.allowed, ", "))
	}
	return register(o)
}

var registry = struct {
	sync.RWMutex
	byKey map[string]Spec
	byEnv map[string]Spec
	// patterns are the options whose key has a NamePlaceholder.
	patterns []Spec
}{byKey: map[string]Spec{}, byEnv: map[string]Spec{}}

// register panics on a duplicate key or environment variable: both are
// programming errors that must fail at init, not at load.
func register[T any](o *Option[T]) *Option[T] {
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.byKey[o.key]; dup {
		panic("conf: option registered twice: " + o.key)
	}
	env := EnvVar(o.key)
	if other, dup := registry.byEnv[env]; dup {
		panic(fmt.Sprintf("conf: options %s and %s share environment variable %s", other.Key(), o.key, env))
	}
	registry.byKey[o.key] = o
	registry.byEnv[env] = o
	if strings.Contains(o.key, NamePlaceholder) {
		registry.patterns = append(registry.patterns, o)
	}
	return o
}

// Options returns every registered option, sorted by key.
func Options() []Spec {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]Spec, 0, len(registry.byKey))
	for _, s := range registry.byKey {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Spec) int { return strings.Compare(a.Key(), b.Key()) })
	return out
}

// Lookup returns the registered option with the given key, or the
// pattern option (see NamePlaceholder) the key fills in.
func Lookup(key string) (Spec, bool) {
	registry.RLock()
	s, ok := registry.byKey[key]
	registry.RUnlock()
	if ok || strings.Contains(key, NamePlaceholder) {
		return s, ok
	}
	return lookupPattern(key)
}

func lookupEnv(name string) (Spec, bool) {
	registry.RLock()
	defer registry.RUnlock()
	s, ok := registry.byEnv[name]
	return s, ok
}

// EnvVar returns the environment variable for key: GOFL_ plus the key
// uppercased with '.' and '-' replaced by '_'.
func EnvVar(key string) string {
	return "GOFL_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(key))
}

// Range checks shared by the option definitions.

func atLeast(min int) func(int) error {
	return func(n int) error {
		if n < min {
			return fmt.Errorf("must be at least %d", min)
		}
		return nil
	}
}

func between(lo, hi int) func(int) error {
	return func(n int) error {
		if n < lo || n > hi {
			return fmt.Errorf("must be between %d and %d", lo, hi)
		}
		return nil
	}
}

func positive(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("must be greater than 0")
	}
	return nil
}

func floatBetween(lo, hi float64) func(float64) error {
	return func(f float64) error {
		if f < lo || f > hi {
			return fmt.Errorf("must be between %g and %g", lo, hi)
		}
		return nil
	}
}

func floatAtLeast(min float64) func(float64) error {
	return func(f float64) error {
		if f < min {
			return fmt.Errorf("must be at least %g", min)
		}
		return nil
	}
}

func nonEmpty(s string) error {
	if strings.TrimSpace(s) == "" {
		return fmt.Errorf("must not be empty")
	}
	return nil
}
