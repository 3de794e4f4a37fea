package providers

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
)

// Standalone is the name of the provider that is none: the cluster is
// started by hand and the ResourceManager never starts or stops workers.
const Standalone = "standalone"

var registry = struct {
	sync.RWMutex
	byName map[string]Provider
}{byName: map[string]Provider{Standalone: {Name: Standalone}}}

// Register adds a provider under p.Name; providers call it from init.
// It panics on an empty or duplicate name, a programming error.
func Register(p Provider) {
	registry.Lock()
	defer registry.Unlock()
	if p.Name == "" {
		panic("providers: Register with an empty name")
	}
	if _, dup := registry.byName[p.Name]; dup {
		panic("providers: provider registered twice: " + p.Name)
	}
	registry.byName[p.Name] = p
}

// Names lists the registered providers, sorted.
func Names() []string {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]string, 0, len(registry.byName))
	for n := range registry.byName {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Lookup finds a provider by name (case-insensitive). An unknown name fails
// with ErrUnknownProvider and lists the known ones.
func Lookup(name string) (Provider, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	registry.RLock()
	p, ok := registry.byName[n]
	registry.RUnlock()
	if !ok {
		return Provider{}, fmt.Errorf("%w %q: known providers are %s", ErrUnknownProvider, name, strings.Join(Names(), ", "))
	}
	return p, nil
}

// NewDeployer looks the provider up and returns its client half.
func NewDeployer(name string, c *conf.Configuration, log zerolog.Logger) (ClusterDeployer, error) {
	p, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	if p.NewDeployer == nil {
		return nil, fmt.Errorf("%w: provider %s deploys no clusters; start a standalone cluster by hand", ErrNotSupported, p.Name)
	}
	return p.NewDeployer(c, log)
}

// NewWorkerDriver looks the provider up and returns its JobManager half,
// or nil (and no error) for a provider without one, such as standalone.
func NewWorkerDriver(name string, dc DriverContext) (WorkerDriver, error) {
	p, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	if p.NewWorkerDriver == nil {
		return nil, nil
	}
	return p.NewWorkerDriver(dc)
}
