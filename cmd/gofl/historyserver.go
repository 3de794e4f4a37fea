package main

import "github.com/urfave/cli/v2"

func historyServerCommand() *cli.Command {
	return &cli.Command{Name: "historyserver", Usage: "serve archived jobs (not yet)"}
}
