package stream

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/stream/runtime"
)

// stateBackendOptions are the keyed state backend settings of a job's
// configuration (state.backend.type, state.backend.incremental, which the
// dispatcher ships to the runners); localDir is where the LSM engine keeps
// its files (the runner's directory under the TaskManager's work dir).
// Unreadable values fall back to the defaults, as the dispatcher validated
// them.
func stateBackendOptions(cfg map[string]string, localDir string, log zerolog.Logger) runtime.StateBackendOptions {
	opts := runtime.StateBackendOptions{Type: strings.ToLower(cfg[conf.StateBackendType.Key()]), LocalDir: localDir, Logger: &log}
	switch opts.Type {
	case conf.StateBackendRocksDB, conf.StateBackendLSM:
		opts.Type = runtime.RocksDBStateBackend
	default:
		opts.Type = runtime.HashMapStateBackend
	}
	if v, err := strconv.ParseBool(strings.TrimSpace(cfg[conf.StateBackendIncremental.Key()])); err == nil {
		opts.Incremental = v
	}
	return opts
}

// restoreDir creates a fresh directory for the shared state files the
// attempt downloads to restore; the caller removes it when the task ends.
func (ex *clusterExecutor) restoreDir(a *pb.ExecutionAttemptID) (string, error) {
	if ex.localDir != "" {
		if err := os.MkdirAll(ex.localDir, 0o755); err != nil {
			return "", fmt.Errorf("restore directory: %w", err)
		}
	}
	dir, err := os.MkdirTemp(ex.localDir, fmt.Sprintf("gofl-restore-%s-%d-*", a.GetJobVertexId(), a.GetSubtaskIndex()))
	if err != nil {
		return "", fmt.Errorf("restore directory: %w", err)
	}
	return dir, nil
}
