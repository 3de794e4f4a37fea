package main

import (
	"errors"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/gofl/gofl/conf"
)

func configCommand() *cli.Command {
	return &cli.Command{
		Name:  "config",
		Usage: "print the effective configuration and where each value came from",
		Description: `Prints every option with its effective value and its source: default,
file PATH:LINE, env VAR, -D or flag. Durations and sizes are shown in
canonical form, so "10000" for a duration shows as "10 s" (bare numbers are
milliseconds). Unknown keys are logged as warnings with a suggestion; any
invalid value makes the command fail with the list of all problems.

Examples:
   gofl config
   gofl config --changed
   gofl config -D heartbeat.timeout=2min --config ./gofl.yaml
   GOFL_REST_PORT=9091 gofl config --changed`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "changed", Usage: "show only options not at their default"},
		},
		Action: printConfig,
		Subcommands: []*cli.Command{
			configDocsCommand(),
		},
	}
}

func printConfig(c *cli.Context) error {
	if c.Args().Present() {
		return fmt.Errorf("config: unexpected argument %q", c.Args().First())
	}
	cfg, _, err := setup(c)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE")
	for _, s := range cfg.Settings() {
		if c.Bool("changed") && s.IsDefault() {
			continue
		}
		v := s.Value
		if v == "" {
			v = `""`
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Spec.Key(), v, s.Source)
	}
	return tw.Flush()
}

func configDocsCommand() *cli.Command {
	return &cli.Command{
		Name:  "docs",
		Usage: "print the configuration reference as a Markdown table",
		Description: `Prints a Markdown table of every option (key, type, default, description),
generated from the option registry in conf/. With --update-readme it rewrites
the table between the generated-config markers in README.md instead; a test
fails when README.md is out of date, so run this after adding an option.

Examples:
   gofl config docs
   gofl config docs --update-readme
   gofl config docs --update-readme --readme path/to/README.md`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "update-readme", Usage: "rewrite the generated section of the README instead of printing"},
			&cli.StringFlag{Name: "readme", Value: "README.md", Usage: "README `FILE` for --update-readme", TakesFile: true},
		},
		Action: func(c *cli.Context) error {
			md := conf.MarkdownReference()
			if !c.Bool("update-readme") {
				_, err := fmt.Fprint(c.App.Writer, md)
				return err
			}
			return updateReadme(c, c.String("readme"), md)
		},
	}
}

func updateReadme(c *cli.Context, path, md string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config docs: %w", err)
	}
	doc, err := conf.ReplaceGenerated(string(old), md)
	if err != nil {
		return fmt.Errorf("config docs: %s: %w", path, err)
	}
	if doc == string(old) {
		_, err := fmt.Fprintf(c.App.Writer, "%s is up to date\n", path)
		return err
	}
	if err := writeFileAtomic(path, []byte(doc)); err != nil {
		return fmt.Errorf("config docs: %w", err)
	}
	_, err = fmt.Fprintf(c.App.Writer, "updated %s\n", path)
	return err
}

// writeFileAtomic writes to a temporary file and renames it over path, so an
// interrupted run never leaves a truncated README.
func writeFileAtomic(path string, data []byte) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, fi.Mode().Perm()); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	return nil
}
