package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/historyserver"
	"github.com/gofl/gofl/storage"
	"github.com/gofl/gofl/web"
)

func historyServerCommand() *cli.Command {
	return &cli.Command{
		Name:  "historyserver",
		Usage: "serve finished jobs' REST API and dashboard from the JobManagers' archives",
		Description: `Runs a history server, as Flink's: it serves the jobs that JobManagers with
jobmanager.archive.fs.dir archived when they ended (one file per job, Flink's
format) after their clusters are gone. It reads historyserver.archive.fs.dir
(comma-separated file:// or hdfs:// URIs) every
historyserver.archive.fs.refresh-interval and serves Flink's REST paths
(/jobs/overview, /jobs/JOBID, its vertices, exceptions, checkpoints, ...)
at historyserver.web.address:historyserver.web.port (0: a free port) until
SIGINT or SIGTERM.

Examples:
   gofl historyserver -D historyserver.archive.fs.dir=file:///var/gofl/completed-jobs
   gofl historyserver -D historyserver.archive.fs.dir=hdfs://nn:9000/completed-jobs -D historyserver.web.port=8082`,
		Action: runHistoryServer,
	}
}

func runHistoryServer(c *cli.Context) error {
	if c.Args().Present() {
		return fmt.Errorf("historyserver: unexpected argument %q; see --help", c.Args().First())
	}
	cfg, log, err := setup(c)
	if err != nil {
		return err
	}
	var dirs []string
	for _, d := range strings.Split(conf.HistoryServerArchiveDirs.Get(cfg), ",") {
		if d = strings.TrimSpace(conf.ExpandEnv(d)); d != "" {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == 0 {
		return errors.New("historyserver: no archive directory; set historyserver.archive.fs.dir (the JobManagers' jobmanager.archive.fs.dir)")
	}
	addr := net.JoinHostPort(conf.HistoryServerWebAddress.Get(cfg), strconv.Itoa(conf.HistoryServerWebPort.Get(cfg)))
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("historyserver: historyserver.web.address/port %s: %w", addr, err)
	}
	// The web dashboard mounts through Options.UI (package web's Handler)
	// once it is part of the build; until then / lists the archived jobs.
	srv := historyserver.New(historyserver.Options{Dirs: dirs, Refresh: conf.HistoryServerRefreshInterval.Get(cfg),
		Storage: storage.OptionsFromConf(cfg), UI: web.Handler(""), Log: log.With().Str("component", "historyserver").Logger()})
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Run(ctx)
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	fmt.Fprintf(c.App.Writer, "History server at http://%s serving %s\n", lis.Addr(), strings.Join(dirs, ", "))
	err = hs.Serve(lis)
	stop()
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("historyserver: %w", err)
}
