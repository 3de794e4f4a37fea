// Command gofl is the single gofl binary: the client CLI today, and the
// JobManager, TaskManager and simulator entry points as they land.
//
// The command layer is thin. newApp (app.go) builds the urfave/cli App and
// lists every command; each command is a function returning a fresh
// *cli.Command (flags hold parse state, so they must not be shared between
// runs). Every command automatically accepts the configuration flags
// --config, -D key=value and --log-level, before or after the command name,
// and gets the loaded configuration and logger from setup(c). Commands must
// write to c.App.Writer / c.App.ErrWriter, never os.Stdout, so tests can run
// the App in-process and capture its output.
package main
