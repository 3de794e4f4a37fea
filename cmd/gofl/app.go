package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/internal/logging"
	"github.com/gofl/gofl/internal/version"
)

// environKey holds, in App.Metadata, the func returning the environment that
// configuration is loaded from; tests replace it.
const environKey = "environ"

// Names of the configuration flags every command accepts.
const (
	flagConfig   = "config"
	flagDynamic  = "D"
	flagLogLevel = "log-level"
)

// newApp builds the gofl CLI. Add new commands to Commands; they get the
// configuration flags automatically.
func newApp() *cli.App {
	app := &cli.App{
		Name:  "gofl",
		Usage: "run Flink-style stream and batch jobs written in Go",
		Description: `gofl re-implements Apache Flink's JobManager/TaskManager runtime in Go.

Configuration comes from, lowest to highest precedence: built-in defaults, a
YAML file (--config FILE, else $GOFL_CONF_DIR/gofl.yaml), environment variables
(GOFL_ plus the key in upper case with '.' and '-' as '_'), and -D key=value.
The configuration flags work before or after a command name.

Examples:
   gofl --version
   gofl config
   gofl -D heartbeat.interval=5s config --changed
   gofl --config conf/gofl.yaml --log-level debug config
   GOFL_TASKMANAGER_NUMBEROFTASKSLOTS=4 gofl config
   gofl config docs
   gofl simulate --kill-at 150ms`,
		Version:                   version.String(),
		Flags:                     configFlags(),
		DisableSliceFlagSeparator: true, // -D values may contain commas
		Metadata:                  map[string]any{environKey: os.Environ},
		Writer:                    os.Stdout,
		ErrWriter:                 os.Stderr,
		OnUsageError:              usageError,
		Commands: []*cli.Command{
			configCommand(),
			simulateCommand(),
			jobmanagerCommand(), localSupervisorCommand(),
			taskManagerCommand(),
			runCommand(), sessionCommand(), submitCommand(), listCommand(), infoCommand(), cancelCommand(),
			savepointCommand(), stopCommand(), cacheCommand(),
			logsCommand(), historyServerCommand(),
		},
	}
	addConfigFlags(app.Commands)
	return app
}

// configFlags returns fresh instances of the configuration flags; flag values
// are stored in the flag, so each command needs its own.
func configFlags() []cli.Flag {
	const category = "Configuration"
	return []cli.Flag{
		&cli.StringFlag{Name: flagConfig, Category: category, TakesFile: true,
			Usage: "read configuration from `FILE` (default: $GOFL_CONF_DIR/gofl.yaml if it exists)"},
		&cli.StringSliceFlag{Name: flagDynamic, Category: category,
			Usage: "set option `key=value`; repeatable; wins over file and environment"},
		&cli.StringFlag{Name: flagLogLevel, Category: category,
			Usage: "log `LEVEL`: trace, debug, info, warn or error (overrides log.level)"},
	}
}

// addConfigFlags gives every command, recursively, the configuration flags
// and the concise usage-error handler.
func addConfigFlags(cmds []*cli.Command) {
	for _, cmd := range cmds {
		for _, f := range configFlags() {
			if !slices.ContainsFunc(cmd.Flags, func(g cli.Flag) bool { return g.Names()[0] == f.Names()[0] }) {
				cmd.Flags = append(cmd.Flags, f)
			}
		}
		if cmd.OnUsageError == nil {
			cmd.OnUsageError = usageError
		}
		addConfigFlags(cmd.Subcommands)
	}
}

// usageError replaces urfave's default, which dumps the whole help text.
func usageError(c *cli.Context, err error, _ bool) error {
	return fmt.Errorf("%w; see --help", err)
}

// setup loads the configuration from the configuration flags of c and its
// parents, the environment and the config file, and builds the logger on
// c.App.ErrWriter. Warnings (e.g. unknown keys) are logged. On error the
// returned logger is still usable.
func setup(c *cli.Context) (*conf.Configuration, zerolog.Logger, error) {
	opts := conf.LoadOptions{Env: environ(c)}
	var logLevel string
	lineage := c.Lineage()
	for i := len(lineage) - 1; i >= 0; i-- { // root first, so the command's own flags win
		ctx := lineage[i]
		local := ctx.LocalFlagNames()
		if slices.Contains(local, flagConfig) {
			opts.File = ctx.String(flagConfig)
		}
		if slices.Contains(local, flagDynamic) {
			opts.Dynamic = append(opts.Dynamic, ctx.StringSlice(flagDynamic)...)
		}
		if slices.Contains(local, flagLogLevel) {
			logLevel = ctx.String(flagLogLevel)
		}
	}
	if logLevel != "" {
		opts.Flags = map[string]conf.FlagValue{conf.LogLevel.Key(): {Flag: "--" + flagLogLevel, Value: logLevel}}
	}

	cfg, warnings, err := conf.Load(opts)
	level := conf.LogLevel.Get(cfg)
	if err != nil {
		if _, perr := logging.ParseLevel(logLevel); perr == nil {
			level = logLevel
		}
	}
	log, lerr := logging.New(c.App.ErrWriter, level)
	if lerr != nil {
		log, _ = logging.New(c.App.ErrWriter, conf.LogLevel.Default())
	}
	for _, w := range warnings {
		log.Warn().Str("key", w.Key).Stringer("source", w.Source).Msg(w.Message)
	}
	return cfg, log, err
}

func environ(c *cli.Context) []string {
	if f, ok := c.App.Metadata[environKey].(func() []string); ok {
		return f()
	}
	return os.Environ()
}
