package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/conf"
)

func cacheCommand() *cli.Command {
	return &cli.Command{
		Name:  "cache",
		Usage: "list and prune the staging blob cache",
		Description: `Deployments stage the gofl binary and job binaries, by content digest, in
the blob cache <staging.dir>/.gofl/blobs/ (by default ~/.gofl/blobs). After
staging, gofl removes the least recently used blobs that no live cluster
uses until the cache fits blob.cache.max-size. A live cluster is one with a
staging directory <staging.dir>/.gofl/CLUSTER_ID/.

Examples:
   gofl cache ls
   gofl cache prune
   gofl cache prune --all
   gofl cache prune -D blob.cache.max-size=500mb`,
		Subcommands: []*cli.Command{
			{
				Name:  "ls",
				Usage: "list the cached blobs, least recently used first, with the live clusters using them",
				Description: `Prints each blob's key, size, when a deployment last staged it and the live
clusters using it, then the total and blob.cache.max-size.

Examples:
   gofl cache ls
   gofl cache ls -D staging.dir=hdfs://nn:8020/user/me`,
				Action: runCacheList,
			},
			{
				Name:  "prune",
				Usage: "remove unused blobs, least recently used first, down to blob.cache.max-size",
				Description: `Removes blobs no live cluster uses, least recently used first, until the
cache fits blob.cache.max-size; with --all (or a size of 0) every unused one.
It refuses to remove anything while a live cluster's staging directory does
not list its blobs (staged by an older gofl).

Examples:
   gofl cache prune
   gofl cache prune --all
   gofl cache prune -D blob.cache.max-size=500mb`,
				Flags:  []cli.Flag{&cli.BoolFlag{Name: "all", Usage: "remove every blob no live cluster uses"}},
				Action: runCachePrune,
			},
		},
	}
}

// cacheDescriptor is the configuration and the descriptor the cache
// commands work through (its staging.dir and fs options).
func cacheDescriptor(c *cli.Context) (*conf.Configuration, *client.ClusterDescriptor, error) {
	cfg, log, err := setup(c)
	if err != nil {
		return nil, nil, err
	}
	desc, err := newDescriptor(cfg, log, targetName(c, cfg))
	if err != nil {
		return nil, nil, fmt.Errorf("cache %s: %w", c.Command.Name, err)
	}
	return cfg, desc, nil
}

func runCacheList(c *cli.Context) error {
	cfg, desc, err := cacheDescriptor(c)
	if err != nil {
		return err
	}
	blobs, err := desc.ListBlobs(c.Context)
	if err != nil {
		return fmt.Errorf("cache ls: %w", err)
	}
	if len(blobs) == 0 {
		fmt.Fprintln(c.App.Writer, "no blobs")
		return nil
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BLOB\tSIZE\tLAST USED\tUSED BY\t")
	var total int64
	for _, b := range blobs {
		users := "-"
		if len(b.UsedBy) > 0 {
			users = fmt.Sprint(b.UsedBy)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", b.Key, humanSize(b.Size), b.LastUsed.Local().Format(time.DateTime), users)
		total += b.Size
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "%d blobs, %s (blob.cache.max-size %s)\n", len(blobs), humanSize(total), conf.BlobCacheMaxSize.Get(cfg))
	return nil
}

func runCachePrune(c *cli.Context) error {
	cfg, desc, err := cacheDescriptor(c)
	if err != nil {
		return err
	}
	max := int64(conf.BlobCacheMaxSize.Get(cfg))
	if c.Bool("all") {
		max = 0
	}
	removed, err := desc.PruneBlobs(c.Context, max)
	var freed int64
	for _, b := range removed {
		fmt.Fprintf(c.App.Writer, "removed %s (%s)\n", b.Key, humanSize(b.Size))
		freed += b.Size
	}
	if err != nil {
		return fmt.Errorf("cache prune: %w", err)
	}
	fmt.Fprintf(c.App.Writer, "removed %d blobs, %s\n", len(removed), humanSize(freed))
	return nil
}

// humanSize is n bytes in binary units, one decimal.
func humanSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, suffix := float64(n), "KMGTPE"
	i := -1
	for f >= unit && i < len(suffix)-1 {
		f /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", f, suffix[i])
}
