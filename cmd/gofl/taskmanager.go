package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/ha"
	"github.com/gofl/gofl/internal/tlsconf"
	"github.com/gofl/gofl/logs"
	"github.com/gofl/gofl/metrics"
	"github.com/gofl/gofl/storage"
	"github.com/gofl/gofl/taskmanager"
)

func taskManagerCommand() *cli.Command {
	return &cli.Command{
		Name:  "taskmanager",
		Usage: "run a TaskManager that registers at the JobManager and runs tasks",
		Description: `Starts a TaskManager process: a TaskExecutor serving gRPC on
taskmanager.host:taskmanager.rpc.port (a free port by default) with
taskmanager.numberOfTaskSlots slots. It registers at the ResourceManager at
jobmanager.rpc.address:jobmanager.rpc.port, retrying with backoff until the
JobManager is up, and runs the tasks the JobMasters deploy to its slots. It
logs its address and resource ID (taskmanager.resource-id, generated when
empty) and runs until SIGINT or SIGTERM, then cancels its tasks, disconnects
and exits 0. A protocol version mismatch or a resource ID held by another
live TaskManager makes it exit 1.

Examples:
   gofl taskmanager
   gofl taskmanager -D jobmanager.rpc.address=jm.example.com -D taskmanager.numberOfTaskSlots=4
   gofl taskmanager -D taskmanager.host=10.0.0.7 -D taskmanager.rpc.port=6122 -D taskmanager.resource-id=tm-7
   GOFL_JOBMANAGER_RPC_PORT=7123 gofl taskmanager --log-level debug`,
		Action: runTaskManager,
	}
}

func runTaskManager(c *cli.Context) error {
	if c.Args().Present() {
		return fmt.Errorf("taskmanager: unexpected argument %q", c.Args().First())
	}
	cfg, log, err := setup(c)
	if err != nil {
		return err
	}
	if err := applySecretsFile(c.Context, cfg, notTaskManagerSecrets...); err != nil {
		return fmt.Errorf("taskmanager: %w", err)
	}
	tcfg := taskmanager.ConfigFromConf(cfg)
	// The cluster's certificates may be staged (hdfs://): read them as the
	// TaskManager reads the rest of staging.
	if tcfg.InternalTLS, err = tlsconf.Internal(c.Context, cfg, tlsconf.ReadStorage(storage.OptionsFromConf(cfg))); err != nil {
		return fmt.Errorf("taskmanager: %w", err)
	}
	if t := conf.HighAvailability(cfg); t != "" && !strings.EqualFold(t, conf.HighAvailabilityNone) {
		// Follow the leading ResourceManager (high availability).
		services, err := ha.New(c.Context, ha.ConfigFromConf(cfg, log.With().Str("component", "ha").Logger()))
		if err != nil {
			return fmt.Errorf("taskmanager: high availability: %w", err)
		}
		defer services.Close()
		tcfg.LeaderRetrieval = services
	} else {
		// No HA: a lost JobManager is not coming back with its jobs.
		tcfg.ExitOnResourceManagerLoss = true
	}
	tcfg.LogFile = os.Getenv(logs.EnvLogFile)
	if tcfg.LogArchive = openProcessLogArchive(c.Context, cfg, log); tcfg.LogArchive != nil {
		defer tcfg.LogArchive.Close()
	}
	te, err := taskmanager.New(tcfg, log)
	if err != nil {
		return err
	}
	stopMetrics, err := startTaskManagerMetrics(cfg, tcfg.Host, te, log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	log.Info().Str("address", te.Address()).Str("resource_id", te.ResourceID()).Msg("TaskManager listening")
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return te.Run(ctx)
}

// startTaskManagerMetrics starts the configured Prometheus reporters and
// the optional pprof endpoint of a TaskManager.
func startTaskManagerMetrics(cfg *conf.Configuration, host string, te *taskmanager.TaskExecutor, log zerolog.Logger) (func(), error) {
	if host == "" {
		host = taskmanager.DefaultHost
	}
	reg := metrics.NewRegistry(metrics.TaskManagerScope, prometheus.Labels{"host": host, "tm_id": te.ResourceID()}, te.MetricsCollector())
	servers, err := metrics.StartReporters(cfg, host, reg, log)
	if err != nil {
		return nil, fmt.Errorf("taskmanager: %w", err)
	}
	pp, err := metrics.StartPprof(cfg, log)
	if err != nil {
		for _, s := range servers {
			s.Close()
		}
		return nil, fmt.Errorf("taskmanager: %w", err)
	}
	if pp != nil {
		servers = append(servers, pp)
	}
	return func() {
		for _, s := range servers {
			s.Close()
		}
	}, nil
}
