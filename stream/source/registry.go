package source

import (
	"fmt"
	"sort"
	"sync"
)

// CoordinatorFactory builds the operator coordinator of a registered source
// in the JobMaster, from the configuration the source serialized at plan
// time (CoordinatedSource). Called once per job on the JobMaster's event
// loop; it must not block.
type CoordinatorFactory func(config []byte, parallelism int, gw Gateway, exec Executor) (OperatorCoordinator, error)

// CoordinatedSource is implemented by a source whose split enumerator runs
// in the JobMaster: the JobManager is another binary than the job's (in
// session and per-job mode), so it cannot run a closure of the job; it
// runs the enumerator registered under Coordinator's name (compiled into
// both binaries, as bigslice registers funcs) with the returned
// configuration.
type CoordinatedSource interface {
	// Coordinator returns the registered name and the serialized
	// configuration the JobMaster builds the enumerator from. Called at
	// plan time.
	Coordinator() (name string, config []byte, err error)
}

var (
	registryMu sync.RWMutex
	registry   = map[string]CoordinatorFactory{}
)

// RegisterCoordinator registers a coordinator factory under name. Call it
// from an init function of a package both the job binary and the gofl
// binary link; it panics on a repeated name.
func RegisterCoordinator(name string, f CoordinatorFactory) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[name]; dup {
		panic(fmt.Sprintf("source: coordinator %q registered twice", name))
	}
	registry[name] = f
}

// RegisterSource registers the coordinator of a Source type: decode
// rebuilds the source from its configuration, and the coordinator runs its
// enumerator.
func RegisterSource[T any, S Split, E any](name string, decode func(config []byte) (Source[T, S, E], error)) {
	RegisterCoordinator(name, func(config []byte, parallelism int, gw Gateway, exec Executor) (OperatorCoordinator, error) {
		src, err := decode(config)
		if err != nil {
			return nil, fmt.Errorf("source: decoding the configuration of %q: %w", name, err)
		}
		return NewCoordinator(src, parallelism, gw, exec)
	})
}

// LookupCoordinator returns the factory registered under name.
func LookupCoordinator(name string) (CoordinatorFactory, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	f, ok := registry[name]
	return f, ok
}

// RegisteredCoordinators lists the registered names, sorted.
func RegisteredCoordinators() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
