package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/gofl/gofl/internal/joinsuite"
	"github.com/gofl/gofl/stream"
)

//	join-suite [--na N] [--nb N] [--keys K] [--pad P] [--checksum] [--hint H] [--aggregate] --output DIR
//
// runs the join suite (internal/joinsuite: inner join, left outer join
// and CoGroup of two generated inputs) in Batch mode and writes its result
// lines into part files; with --checksum only a count and checksum per
// join kind. --hint picks the joins' strategy (sort-merge, hash-first,
// hash-second); --aggregate runs the aggregation suite instead
// (joinsuite.BuildAggregation).
func init() { stream.RegisterJob("join-suite", buildJoinSuite) }

func buildJoinSuite(env *stream.Environment, args []string) error {
	fs := flag.NewFlagSet("join-suite", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var s joinsuite.Spec
	fs.Int64Var(&s.NA, "na", 2000, "left records")
	fs.Int64Var(&s.NB, "nb", 1500, "right records")
	fs.Int64Var(&s.Keys, "keys", 300, "keys per side")
	fs.IntVar(&s.Pad, "pad", 0, "extra key digits")
	output := fs.String("output", "", "output directory")
	checksum := fs.Bool("checksum", false, "write only a count and checksum per join kind (joinsuite.BuildChecksum)")
	hint := fs.String("hint", "sort-merge", "join strategy: sort-merge, hash-first or hash-second")
	aggregate := fs.Bool("aggregate", false, "run the aggregation suite (joinsuite.BuildAggregation)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch *hint {
	case "sort-merge":
		s.Hint = stream.RepartitionSortMerge
	case "hash-first":
		s.Hint = stream.RepartitionHashFirst
	case "hash-second":
		s.Hint = stream.RepartitionHashSecond
	default:
		return fmt.Errorf("join-suite: unknown --hint %q", *hint)
	}
	if *output == "" {
		return errors.New("usage: join-suite [--na N] [--nb N] [--keys K] [--pad P] --output DIR")
	}
	env.SetRuntimeMode(stream.Batch)
	if *aggregate {
		joinsuite.BuildAggregation(env, s).WriteAsText(*output).Name("Results")
		return nil
	}
	if *checksum {
		joinsuite.BuildChecksum(env, s).WriteAsText(*output).Name("Results")
		return nil
	}
	joinsuite.Build(env, s).WriteAsText(*output).Name("Results")
	return nil
}
