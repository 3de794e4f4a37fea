package main

import (
	"errors"
	"flag"
	"io"

	"github.com/gofl/gofl/internal/windowsuite"
	"github.com/gofl/gofl/stream"
)

//	window-suite [--events N] --output DIR
//
// runs the window suite (internal/windowsuite) on N generated events
// and writes its result lines into part files.
func init() { stream.RegisterJob("window-suite", buildWindowSuite) }

func buildWindowSuite(env *stream.Environment, args []string) error {
	fs := flag.NewFlagSet("window-suite", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	n := fs.Int("events", 3000, "events to generate")
	output := fs.String("output", "", "output directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *output == "" {
		return errors.New("usage: window-suite [--events N] --output DIR")
	}
	windowsuite.Build(env, windowsuite.Events(*n)).WriteAsText(*output).Name("Results")
	return nil
}
