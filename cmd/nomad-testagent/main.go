// Command nomad-testagent runs gofl's Nomad test agent in the foreground:
// a single-node stand-in for `nomad agent -dev` that serves the part of
// Nomad's HTTP API the nomad provider uses and runs raw_exec tasks as real
// local processes. See providers/nomad/testagent/README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/gofl/gofl/internal/logging"
	"github.com/gofl/gofl/providers/nomad/testagent"
)

func main() {
	var cfg testagent.Config
	var namespaces, level string
	flag.StringVar(&cfg.Addr, "addr", "127.0.0.1:4646", "HTTP listen address")
	flag.StringVar(&cfg.DataDir, "data-dir", "", "allocation directory root (default: a temporary directory)")
	flag.IntVar(&cfg.NodeCPU, "cpu", 4000, "node CPU capacity in MHz")
	flag.IntVar(&cfg.NodeMemoryMB, "memory", 8192, "node memory capacity in MB")
	flag.StringVar(&cfg.Datacenter, "dc", "dc1", "datacenter")
	flag.StringVar(&cfg.Region, "region", "global", "region")
	flag.StringVar(&cfg.ACLToken, "acl-token", os.Getenv("NOMAD_TESTAGENT_ACL_TOKEN"), "require this token (X-Nomad-Token) on every request")
	flag.StringVar(&namespaces, "namespaces", "", "comma-separated namespaces to create besides default")
	flag.StringVar(&level, "log-level", "info", "log level: trace, debug, info, warn, error")
	flag.Parse()
	if namespaces != "" {
		cfg.Namespaces = strings.Split(namespaces, ",")
	}
	log, err := logging.New(os.Stderr, level)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, err := testagent.New(cfg, log)
	if err != nil {
		log.Fatal().Err(err).Msg("nomad-testagent")
	}
	if err := a.Start(ctx); err != nil {
		log.Fatal().Err(err).Msg("nomad-testagent")
	}
	fmt.Fprintf(os.Stderr, "nomad-testagent: export NOMAD_ADDR=%s\n", a.URL())
	<-ctx.Done()
	if err := a.Close(); err != nil {
		log.Error().Err(err).Msg("close")
	}
}
