// Command testrunner is a job binary for tests: in runner role it serves the
// built-in invokables, optionally claiming another protocol version or
// fingerprint to exercise the TaskManager's checks. On the data port it
// inherited, if any, it answers every connection with its process ID, so
// tests can tell which runner listens on an advertised data address.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/taskmanager/runner"
)

func main() {
	protocol := flag.Int("protocol", 0, "runner protocol version to claim (0: the real one)")
	fingerprint := flag.String("fingerprint", "", "graph fingerprint to claim")
	flag.Parse()
	if !runner.IsRunner() {
		fmt.Fprintln(os.Stderr, "testrunner: start me as a job runner")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log := zerolog.New(os.Stderr).With().Timestamp().Logger()
	lis, _, err := runner.DataListener()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if lis != nil {
		defer lis.Close()
		go func() {
			for {
				conn, err := lis.Accept()
				if err != nil {
					return
				}
				fmt.Fprintf(conn, "%d\n", os.Getpid())
				conn.Close()
			}
		}()
	}
	err = runner.ServeFromEnv(ctx, runner.Info{ProtocolVersion: int32(*protocol), Fingerprint: *fingerprint, SDKVersion: "test"},
		runner.NewBuiltinExecutor(), log)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
