package taskmanager

import (
	"context"
	"path/filepath"
	"sync"
	"time"

	"github.com/gofl/gofl/logs"
)

// finalShipTimeout bounds the archiving of the logs at the end of Run.
const finalShipTimeout = 30 * time.Second

// LogSource is this TaskManager's log files: its own (Config.LogFile) and
// its job runners' (<work dir>/jobs/<job-id>/runner.{log,out,err}).
func (te *TaskExecutor) LogSource() logs.Source {
	src := logs.Source{Own: te.cfg.LogFile, OwnName: logs.TaskManagerLog}
	if te.cfg.WorkDir != "" && te.cfg.TaskRunner == nil {
		src.RunnerDir = filepath.Join(te.cfg.WorkDir, "jobs")
	}
	return src
}

// shipLogsSoon asks the shipper to archive now; it never blocks.
func (te *TaskExecutor) shipLogsSoon() {
	select {
	case te.logShip <- struct{}{}:
	default:
	}
}

// startLogShipper starts the goroutine that archives the logs when asked
// and every LogArchiveInterval. The returned function stops it, archives
// once more (bounded by finalShipTimeout) and returns when done; Run calls
// it once the runners have stopped. Without an archive both do nothing.
func (te *TaskExecutor) startLogShipper() (stop func()) {
	a := te.cfg.LogArchive
	if a == nil {
		return func() {}
	}
	proc, err := logs.TaskManagerProcess(te.cfg.ResourceID)
	if err != nil {
		te.log.Warn().Err(err).Msg("logs are not archived")
		return func() {}
	}
	ship := func(ctx context.Context) {
		if err := a.Put(ctx, proc, te.LogSource().List()); err != nil {
			te.log.Warn().Err(err).Msg("archiving logs")
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var tick <-chan time.Time
		if d := te.cfg.LogArchiveInterval; d > 0 {
			t := time.NewTicker(d)
			defer t.Stop()
			tick = t.C
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-te.logShip:
			case <-tick:
			}
			ship(ctx)
		}
	}()
	return func() {
		cancel()
		wg.Wait()
		fctx, done := context.WithTimeout(context.Background(), finalShipTimeout)
		defer done()
		ship(fctx)
		te.log.Info().Str("archive", a.URI(proc, "")).Msg("logs archived")
	}
}
