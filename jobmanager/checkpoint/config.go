package checkpoint

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gofl/gofl/conf"
)

// ErrInvalidConfig wraps every Config.Validate error.
var ErrInvalidConfig = errors.New("checkpoint: invalid configuration")

// Retention says what becomes of completed checkpoints when the job ends
// (Flink's ExternalizedCheckpointRetention); the conf values.
type Retention = string

// Config of one job's coordinator.
type Config struct {
	// Interval between periodic checkpoints; 0 disables them (savepoints
	// still work).
	Interval time.Duration
	// Timeout aborts a checkpoint not complete after this long.
	Timeout time.Duration
	// MinPause is the least time from the completion of a checkpoint to
	// the trigger of the next periodic one.
	MinPause time.Duration
	// MaxConcurrent bounds the periodic checkpoints in progress at once.
	MaxConcurrent int
	// TolerableFailures is how many checkpoints may fail in a row; one
	// more fails the job.
	TolerableFailures int
	// AtLeastOnce does not align barriers (the zero value is EXACTLY_ONCE).
	AtLeastOnce    bool
	Unaligned      bool
	AlignedTimeout time.Duration
	// NumRetained completed checkpoints are kept; older ones are discarded.
	NumRetained int
	// CheckpointsDir is state.checkpoints.dir: checkpoint n of the job
	// goes to <CheckpointsDir>/<job-id>/chk-<n>.
	CheckpointsDir string
	// SavepointsDir is the default savepoint target directory.
	SavepointsDir string
	Retention     Retention
	// StartTime is the wall time of logical time 0: trigger timestamps
	// and statistics are shown in wall time.
	StartTime time.Time
	// Rand draws the random part of savepoint directory names; nil uses a
	// fixed sequence (tests).
	Rand func() uint64
	// FirstID is the least id the job's next checkpoint may take (ids
	// continue after a restored checkpoint's in any case). With HA, the
	// JobMaster sets it from the job's CheckpointIDCounter so that no id
	// is used twice across leaders. 0: from 1.
	FirstID int64
}

// DefaultConfig has Flink's defaults, checkpointing disabled.
func DefaultConfig() Config {
	return Config{Timeout: 10 * time.Minute, MaxConcurrent: 1, NumRetained: 1,
		Retention: conf.NoExternalizedCheckpoints}
}

// ConfigFromConf reads the checkpointing options.
func ConfigFromConf(c *conf.Configuration) Config {
	return Config{
		Interval:          conf.CheckpointingInterval.Get(c),
		Timeout:           conf.CheckpointingTimeout.Get(c),
		MinPause:          conf.CheckpointingMinPause.Get(c),
		MaxConcurrent:     conf.CheckpointingMaxConcurrent.Get(c),
		TolerableFailures: conf.CheckpointingTolerableFailures.Get(c),
		AtLeastOnce:       conf.CheckpointingMode.Get(c) == conf.CheckpointingAtLeastOnce,
		Unaligned:         conf.CheckpointingUnaligned.Get(c),
		AlignedTimeout:    conf.CheckpointingAlignedTimeout.Get(c),
		NumRetained:       conf.CheckpointsNumRetained.Get(c),
		CheckpointsDir:    conf.CheckpointsDir.Get(c),
		SavepointsDir:     conf.SavepointsDir.Get(c),
		Retention:         conf.ExternalizedCheckpointRetention.Get(c),
	}
}

// Enabled reports whether periodic checkpoints are on.
func (c Config) Enabled() bool { return c.Interval > 0 }

// Validate reports every problem at once.
func (c Config) Validate() error {
	var p []string
	if c.Interval < 0 {
		p = append(p, "interval must not be negative")
	}
	if c.Interval > 0 && c.CheckpointsDir == "" {
		p = append(p, "checkpointing needs a checkpoints directory (state.checkpoints.dir)")
	}
	if c.Timeout <= 0 {
		p = append(p, "timeout must be positive")
	}
	if c.MinPause < 0 {
		p = append(p, "min-pause must not be negative")
	}
	if c.MaxConcurrent < 1 {
		p = append(p, "max-concurrent-checkpoints must be at least 1")
	}
	if c.TolerableFailures < 0 {
		p = append(p, "tolerable-failed-checkpoints must not be negative")
	}
	if c.NumRetained < 1 {
		p = append(p, "num-retained must be at least 1")
	}
	switch c.Retention {
	case conf.NoExternalizedCheckpoints, conf.DeleteOnCancellation, conf.RetainOnCancellation:
	default:
		p = append(p, fmt.Sprintf("unknown retention %q", c.Retention))
	}
	if len(p) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, strings.Join(p, "; "))
	}
	return nil
}
