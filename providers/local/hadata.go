package local

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/ha"
)

// haCleanupTimeout bounds removing a failed cluster's HA data.
const haCleanupTimeout = time.Minute

// cleanupHAData removes the high-availability data (ZooKeeper
// <path.root>/<cluster-id>, <storageDir>/<cluster-id>) of the failed
// cluster in dir, with the configuration its JobManager was launched with
// (launch.json): nothing of it can recover any more. A cluster without
// high availability has none. Errors are logged: the cluster goes anyway.
func cleanupHAData(dir string, log zerolog.Logger) {
	b, err := os.ReadFile(filepath.Join(dir, jobManagerDir, launchFile))
	if err != nil {
		return // deployed before launch.json was always written
	}
	var l launch
	if err := json.Unmarshal(b, &l); err != nil {
		log.Warn().Err(err).Msg("the cluster's launch.json; its HA data (if any) stays")
		return
	}
	ha.CleanupFailedCluster(l.Config, haCleanupTimeout, log)
}

// writeLaunch writes launch.json, what a restart starts again and what a
// failed cluster's cleanup reads (0600: it may hold secrets).
func writeLaunch(dir string, l launch) error {
	b, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("local: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, jobManagerDir, launchFile), b, 0o600); err != nil {
		return fmt.Errorf("local: %w", err)
	}
	return nil
}
