package main

import (
	"fmt"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/jobmanager"
	"github.com/gofl/gofl/providers/local"
	"github.com/gofl/gofl/storage"
)

func jobmanagerCommand() *cli.Command {
	return &cli.Command{
		Name:  "jobmanager",
		Usage: "run a standalone session JobManager (Dispatcher, ResourceManager, JobMasters)",
		Description: `Starts a JobManager process: the Dispatcher with its REST API at
rest.address:rest.port, the ResourceManager TaskManagers register with at
jobmanager.rpc.address:jobmanager.rpc.port, and one JobMaster per submitted
job. It runs until interrupted (SIGINT or SIGTERM), then stops its jobs.
With deployment.provider=standalone (the default) it never starts
TaskManagers itself: start them with 'gofl taskmanager' or
scripts/start-cluster.sh. With a provider (local, nomad) its
ResourceManager starts TaskManagers when jobs need slots and releases them
when idle for resourcemanager.taskmanager-timeout.

Examples:
   gofl jobmanager
   gofl jobmanager -D rest.port=9081 -D jobmanager.rpc.port=7123
   gofl jobmanager -D heartbeat.interval=1s -D heartbeat.timeout=5s
   gofl jobmanager -D deployment.provider=local -D taskmanager.numberOfTaskSlots=2`,
		Action: runJobManager,
	}
}

func runJobManager(c *cli.Context) error {
	if c.Args().Present() {
		return fmt.Errorf("jobmanager: unexpected argument %q", c.Args().First())
	}
	cfg, log, err := setup(c)
	if err != nil {
		return err
	}
	if err := applySecretsFile(c.Context, cfg); err != nil {
		return fmt.Errorf("jobmanager: %w", err)
	}
	// Split enumerators (the file source's) run here and open files with
	// this JobManager's settings: its Kerberos login or tokens.
	storage.SetProcessOptions(storage.OptionsFromConf(cfg))
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	jm, err := jobmanager.Start(ctx, cfg, log)
	if err != nil {
		return err
	}
	scheme := "http"
	if conf.SSLRestEnabled.Get(cfg) {
		scheme = "https"
	}
	fmt.Fprintf(c.App.Writer, "JobManager RPC at %s, REST at %s://%s\n", jm.RPCAddress, scheme, jm.RESTAddress)
	select {
	case <-ctx.Done():
	case <-jm.Done(): // a per-job or application cluster's work ended
	}
	err = jm.Wait()
	archiveJobManagerLog(cfg, log)
	local.WriteExitFile(err) // not failed: it ended by itself
	return err
}

// localSupervisorCommand is the local provider's JobManager supervisor
// (local.Supervise), which the provider starts itself.
func localSupervisorCommand() *cli.Command {
	return &cli.Command{
		Name:  local.SupervisorRole,
		Usage: "restart a local cluster's JobManager (started by the local provider)",
		Description: `Watches the JobManager of a local cluster and starts it again, on the
same ports, when it ends abnormally (kill -9, crash), up to
provider.local.jobmanager.attempts. The local provider starts it itself;
there is no need to run it by hand.

Examples:
   # what the provider runs
   gofl local-supervisor -D provider.local.dir=$HOME/.local/state/gofl -D deployment.cluster-id=job-1a2b3c`,
		Hidden: true,
		Action: func(c *cli.Context) error {
			cfg, log, err := setup(c)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return local.Supervise(ctx, conf.ExpandEnv(conf.LocalProviderDir.Get(cfg)), conf.DeploymentClusterID.Get(cfg), log)
		},
	}
}
