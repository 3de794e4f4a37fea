package main

import (
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/jobmanager/scheduler"
	"github.com/gofl/gofl/jobmanager/simulator"
)

func simulateCommand() *cli.Command {
	return &cli.Command{
		Name:  "simulate",
		Usage: "run the wordcount job through the scheduling core on a simulated cluster",
		Description: `Drives a wordcount-shaped job (source -> tokenize -> count -> sink) through
gofl's real scheduling core: JobGraph, ExecutionGraph, pipelined regions, the
configured scheduling, slot allocation, failover and restart strategies. The
cluster (ResourceManager, TaskManagers, task run times, TaskManager crashes)
is simulated in logical time, so a run is deterministic for a seed and takes
milliseconds. It prints the job's timeline and exits non-zero unless the job
finishes.

Examples:
   gofl simulate
   gofl simulate --mode streaming --parallelism 8 --taskmanagers 4 --slots 2
   gofl simulate --kill-at 150ms -D restart-strategy.type=fixed-delay -D restart-strategy.fixed-delay.attempts=3
   gofl simulate -D jobmanager.scheduler.scheduling-strategy=lazy-from-sources -D jobmanager.execution.failover-strategy=full`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "mode", Value: "batch", Usage: "`batch` (BLOCKING exchanges) or streaming (PIPELINED)"},
			&cli.IntFlag{Name: "parallelism", Aliases: []string{"p"}, Value: 4, Usage: "parallelism of every vertex"},
			&cli.IntFlag{Name: "taskmanagers", Value: 2, Usage: "simulated TaskManagers"},
			&cli.IntFlag{Name: "slots", Value: 2, Usage: "slots per TaskManager"},
			&cli.StringSliceFlag{Name: "kill-at", Usage: "kill the busiest TaskManager at this logical `TIME` (e.g. 150ms); repeatable"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed for task durations"},
		},
		Action: runSimulate,
	}
}

func runSimulate(c *cli.Context) error {
	cfg, _, err := setup(c)
	if err != nil {
		return err
	}
	mode := c.String("mode")
	if mode != "batch" && mode != "streaming" {
		return fmt.Errorf("simulate: --mode must be batch or streaming, not %q", mode)
	}
	if c.Int("parallelism") < 1 {
		return fmt.Errorf("simulate: --parallelism must be at least 1")
	}
	var kills []time.Duration
	for _, k := range c.StringSlice("kill-at") {
		d, err := conf.ParseDuration(k)
		if err != nil {
			return fmt.Errorf("simulate: --kill-at %q: %w", k, err)
		}
		kills = append(kills, d)
	}
	scfg := scheduler.ConfigFromConf(cfg)
	if err := scfg.Validate(); err != nil {
		return err
	}
	job := simulator.WordcountJob(c.Int("parallelism"), mode == "batch")
	w := c.App.Writer
	fmt.Fprintf(w, "simulating %s wordcount at parallelism %d on %d TaskManagers x %d slots (%s scheduling, %s failover, restart %s)\n",
		mode, c.Int("parallelism"), c.Int("taskmanagers"), c.Int("slots"), scfg.Strategy, scfg.Failover, restartName(scfg))
	res, err := simulator.Run(scfg, job, simulator.Options{
		TaskManagers: c.Int("taskmanagers"), SlotsPerTM: c.Int("slots"), Seed: c.Uint64("seed"),
		MinTaskDuration: 50 * time.Millisecond, MaxTaskDuration: 250 * time.Millisecond,
		HeartbeatTimeout: 50 * time.Millisecond, ReplaceAfter: 100 * time.Millisecond,
		KillAt: kills, Limit: time.Hour,
		Observe: func(now time.Duration, r *scheduler.Ready) { printReady(w, now, r) },
		Log:     func(now time.Duration, msg string) { fmt.Fprintf(w, "[%8.3fs] %s\n", now.Seconds(), msg) },
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "job %s after %v of logical time: %d deployments, %d restarts, %d TaskManagers killed\n",
		res.Status, res.Elapsed, res.Deployments, res.Restarts, len(res.Killed))
	if res.Status != scheduler.JobFinished {
		return fmt.Errorf("simulate: job ended %s", res.Status)
	}
	return nil
}

func restartName(cfg scheduler.Config) string {
	if t, ok := cfg.Restart.EffectiveType(); ok {
		return t
	}
	return cfg.Restart.Type
}

func printReady(w io.Writer, now time.Duration, r *scheduler.Ready) {
	at := fmt.Sprintf("[%8.3fs]", now.Seconds())
	for _, s := range r.JobStatus {
		if s.Cause != nil {
			fmt.Fprintf(w, "%s job %s -> %s: %v\n", at, s.From, s.To, s.Cause)
		} else {
			fmt.Fprintf(w, "%s job %s -> %s\n", at, s.From, s.To)
		}
	}
	if len(r.Deployments) > 0 {
		byTM := map[string]int{}
		var order []string
		for _, d := range r.Deployments {
			if byTM[d.TaskManager.ID] == 0 {
				order = append(order, d.TaskManager.ID)
			}
			byTM[d.TaskManager.ID]++
		}
		fmt.Fprintf(w, "%s deploy", at)
		for _, tm := range order {
			fmt.Fprintf(w, " %d to %s", byTM[tm], tm)
		}
		fmt.Fprintf(w, " (first: %s)\n", r.Deployments[0].Descriptor.TaskInformation.TaskName)
	}
	if len(r.Cancellations) > 0 {
		fmt.Fprintf(w, "%s cancel %d tasks\n", at, len(r.Cancellations))
	}
	n := 0
	for _, p := range r.PartitionReleases {
		n += len(p.Partitions)
	}
	if n > 0 {
		fmt.Fprintf(w, "%s release %d consumed partitions\n", at, n)
	}
}
