package conf

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// DefaultConfigFileName is the file looked up in $GOFL_CONF_DIR.
const DefaultConfigFileName = "gofl.yaml"

// ConfDirEnv names the directory holding gofl.yaml when --config is not given.
const ConfDirEnv = "GOFL_CONF_DIR"

// LoadOptions are the inputs to Load, mirroring the CLI's global flags.
type LoadOptions struct {
	// File is the YAML file from --config. If empty, $GOFL_CONF_DIR/gofl.yaml
	// is read if it exists. A named file that cannot be read is an error.
	File string
	// Dynamic holds -D arguments, "key=value" each; later ones win.
	Dynamic []string
	// Flags holds values of dedicated flags (e.g. --log-level), keyed by
	// option key; they take precedence over everything else.
	Flags map[string]FlagValue
	// Env is the environment as "NAME=value" pairs. Nil means os.Environ();
	// pass an empty non-nil slice for no environment.
	Env []string
}

// FlagValue is a value from a dedicated flag and that flag's name.
type FlagValue struct {
	Flag  string // e.g. "--log-level"
	Value string
}

type rawValue struct {
	key, value string
	src        Source
}

// Load builds a Configuration from defaults < YAML file < environment < -D <
// dedicated flags. It returns warnings for tolerated oddities (unknown keys,
// keys set twice in a file) and fails with a *ValidationError listing every
// bad value, or with ErrMalformedYAML / ErrConfigFile for unreadable files.
func Load(opts LoadOptions) (*Configuration, []Warning, error) {
	env := opts.Env
	if env == nil {
		env = os.Environ()
	}
	var (
		layers   []rawValue
		warnings []Warning
		problems []Problem
	)

	path, err := configFile(opts.File, env)
	if err != nil {
		return nil, nil, err
	}
	if path != "" {
		vals, ws, ps, err := readYAML(path)
		if err != nil {
			return nil, nil, err
		}
		layers, warnings, problems = append(layers, vals...), append(warnings, ws...), append(problems, ps...)
	}

	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, "GOFL_") {
			continue
		}
		// Other GOFL_* variables (GOFL_CONF_DIR, runtime internals) are not
		// options and are deliberately ignored.
		if spec, ok := lookupEnv(name); ok {
			layers = append(layers, rawValue{spec.Key(), value, EnvSource(name)})
		}
	}

	var syntaxProblems []Problem
	for _, d := range opts.Dynamic {
		key, value, ok := strings.Cut(d, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			syntaxProblems = append(syntaxProblems, Problem{Value: d, Source: DynamicSource,
				Msg: fmt.Sprintf("-D %q: expected key=value", d)})
			continue
		}
		layers = append(layers, rawValue{key, strings.TrimSpace(value), DynamicSource})
	}

	for _, key := range slices.Sorted(maps.Keys(opts.Flags)) {
		fv := opts.Flags[key]
		layers = append(layers, rawValue{key, fv.Value, FlagSource(fv.Flag)})
	}

	// Later layers win; only the effective value of each key is validated,
	// so a bad value that is overridden does not block startup.
	final := map[string]rawValue{}
	var order []string
	for _, l := range layers {
		if _, seen := final[l.key]; !seen {
			order = append(order, l.key)
		}
		final[l.key] = l
	}

	c := NewConfiguration()
	for _, key := range order {
		l := final[key]
		err := c.Set(l.key, l.value, l.src)
		var ve *ValidationError
		switch {
		case err == nil:
		case errors.As(err, &ve):
			problems = append(problems, ve.Problems...)
		case errors.Is(err, ErrUnknownKey):
			warnings = append(warnings, unknownKeyWarning(l.key, l.src))
			c.put(Entry{Key: l.key, Raw: l.value, Source: l.src})
		default:
			return nil, nil, err
		}
	}
	problems = append(problems, syntaxProblems...)
	if len(problems) == 0 {
		problems = crossCheck(c)
	}
	if len(problems) > 0 {
		return nil, warnings, &ValidationError{Problems: problems}
	}
	return c, warnings, nil
}

// configFile resolves which YAML file to read, or "" for none.
func configFile(explicit string, env []string) (string, error) {
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			return "", fmt.Errorf("%w %s: %w", ErrConfigFile, explicit, err)
		}
		return explicit, nil
	}
	var dir string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, ConfDirEnv+"="); ok {
			dir = v
		}
	}
	if dir == "" {
		return "", nil
	}
	path := filepath.Join(dir, DefaultConfigFileName)
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		return "", fmt.Errorf("%w %s (from %s): %w", ErrConfigFile, path, ConfDirEnv, err)
	}
	return path, nil
}

// readYAML reads a flat or nested YAML mapping and flattens nested maps with
// dots, so `heartbeat: {interval: 10 s}` equals `heartbeat.interval: 10 s`.
func readYAML(path string) ([]rawValue, []Warning, []Problem, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w %s: %w", ErrConfigFile, path, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, nil, nil, fmt.Errorf("%w in %s: %w", ErrMalformedYAML, path, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, nil, nil, nil // empty file
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, nil, nil, nil // only comments
	}
	if root.Kind != yaml.MappingNode {
		return nil, nil, nil, fmt.Errorf("%w in %s: line %d: expected a mapping of keys to values", ErrMalformedYAML, path, root.Line)
	}
	f := flattener{path: path, lines: map[string]int{}}
	f.walk("", root)
	return f.vals, f.warnings, f.problems, nil
}

type flattener struct {
	path     string
	vals     []rawValue
	lines    map[string]int
	warnings []Warning
	problems []Problem
}

func (f *flattener) walk(prefix string, n *yaml.Node) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := k.Value
		if prefix != "" {
			key = prefix + "." + key
		}
		for v.Kind == yaml.AliasNode && v.Alias != nil {
			v = v.Alias
		}
		src := FileSource(f.path, k.Line)
		switch v.Kind {
		case yaml.MappingNode:
			f.walk(key, v)
		case yaml.ScalarNode:
			value := v.Value
			if v.Tag == "!!null" {
				value = ""
			}
			if line, dup := f.lines[key]; dup {
				f.warnings = append(f.warnings, Warning{Key: key, Source: src,
					Message: fmt.Sprintf("key %q is set twice in %s (lines %d and %d); the last one wins", key, f.path, line, k.Line)})
			}
			f.lines[key] = k.Line
			f.vals = append(f.vals, rawValue{key, value, src})
		default:
			f.problems = append(f.problems, Problem{Key: key, Source: src,
				Msg: "expected a single value, not a list"})
		}
	}
}
