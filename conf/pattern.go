package conf

import (
	"slices"
	"strings"
)

// NamePlaceholder in an option's key stands for one name the user picks,
// as in Flink's metrics.reporter.<name>.port: the key matches any one
// segment (no dots) there.
const NamePlaceholder = "<name>"

// lookupPattern finds the option whose key has a NamePlaceholder that
// key fills in.
func lookupPattern(key string) (Spec, bool) {
	registry.RLock()
	defer registry.RUnlock()
	for _, s := range registry.patterns {
		if _, ok := patternName(s.Key(), key); ok {
			return s, true
		}
	}
	return nil, false
}

// patternName is the name key gives pattern's placeholder.
func patternName(pattern, key string) (string, bool) {
	prefix, suffix, ok := strings.Cut(pattern, NamePlaceholder)
	if !ok || len(key) <= len(prefix)+len(suffix) || !strings.HasPrefix(key, prefix) || !strings.HasSuffix(key, suffix) {
		return "", false
	}
	name := key[len(prefix) : len(key)-len(suffix)]
	return name, !strings.Contains(name, ".")
}

// For is the option of a pattern (a key with NamePlaceholder) for one
// name: read its value with Get.
func (o *Option[T]) For(name string) *Option[T] {
	c := *o
	c.key = strings.Replace(o.key, NamePlaceholder, name, 1)
	return &c
}

// Names lists, sorted, the names c sets pattern's key for.
func Names(c *Configuration, pattern Spec) []string {
	var out []string
	for _, k := range c.Keys() {
		if n, ok := patternName(pattern.Key(), k); ok && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
