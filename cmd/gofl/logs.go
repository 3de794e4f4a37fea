package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/internal/ids"
	"github.com/gofl/gofl/logs"
	"github.com/gofl/gofl/providers"
)

func logsCommand() *cli.Command {
	return &cli.Command{
		Name:  "logs",
		Usage: "print the logs of a cluster's processes and job runners, live or archived",
		Description: `Prints logs of cluster CLUSTER_ID: the JobManager's log by default, a
TaskManager's with --taskmanager ID, or with --job JOBID the logs of the
job's runners on every TaskManager (runner-JOBID.log: the job's stdout,
Print() included, and stderr, panics included; --file picks
runner-JOBID.out or .err instead). --list lists the files instead.

While the cluster runs they come from its REST API (-m HOST:PORT also
works without -c); once it is gone, from its log archive
(cluster.log-archive.dir/CLUSTER_ID, default
<staging.dir>/.gofl/CLUSTER_ID/logs), where TaskManagers copy their logs as
runners end, every cluster.log-archive.interval and when they stop, and
the local provider copies what is left when it kills or cleans a cluster.
--follow keeps printing what live logs append until Ctrl-C or the cluster
ends.

Examples:
   gofl logs -c session-3f1c5a8e0b7d
   gofl logs -c per-job-3f1c5a8e0b7d --job 3f1c5a8e0b7d4e2a9c6f1b0d8e7a5c43
   gofl logs -c session-3f1c5a8e0b7d --taskmanager taskmanager-1 --follow
   gofl logs -c session-3f1c5a8e0b7d --job 3f1c5a8e0b7d4e2a9c6f1b0d8e7a5c43 --file out --tail 20
   gofl logs -c per-job-3f1c5a8e0b7d --list`,
		Flags: []cli.Flag{
			clusterFlag(), targetFlag(), jobManagerFlag(),
			&cli.StringFlag{Name: "job", Aliases: []string{"j"}, Usage: "the runner logs of job `JOBID`"},
			&cli.StringFlag{Name: "taskmanager", Usage: "the logs of TaskManager `ID`"},
			&cli.StringFlag{Name: "file", Usage: "which file: a `NAME` from --list, or with --job one of log, out, err"},
			&cli.BoolFlag{Name: "list", Usage: "list the log files instead of printing them"},
			&cli.IntFlag{Name: "tail", Usage: "print only the last `N` lines of each file"},
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing what the (live) logs append"},
			&cli.BoolFlag{Name: "archive", Usage: "read the archive even if the cluster still runs"},
		},
		Action: runLogs,
	}
}

// logRef is one log file of a cluster: a TaskManager's (TM set) or the
// JobManager's.
type logRef struct {
	TM   string
	Name string
	Size int64
}

func (r logRef) label() string {
	if r.TM == "" {
		return string(logs.JobManagerProcess) + "/" + r.Name
	}
	return r.TM + "/" + r.Name
}

// logReader reads a cluster's logs live (REST) or from the archive.
type logReader interface {
	list(ctx context.Context, job, tm string) ([]logRef, error)
	read(ctx context.Context, ref logRef, r logs.Range) ([]byte, error)
	where() string
}

func runLogs(c *cli.Context) error {
	if c.Args().Present() {
		return fmt.Errorf("logs: unexpected argument %q; see --help", c.Args().First())
	}
	cfg, log, err := setup(c)
	if err != nil {
		return err
	}
	job, tm, id := c.String("job"), c.String("taskmanager"), c.String(flagCluster)
	if job != "" {
		if err := ids.JobID("--job", job); err != nil {
			return fmt.Errorf("logs: %w", err)
		}
	}
	if tm != "" {
		if _, err := logs.TaskManagerProcess(tm); err != nil {
			return fmt.Errorf("logs: --taskmanager: %w", err)
		}
	}
	if id == "" && c.String(flagJobManager) == "" {
		return errors.New("logs: name the cluster with -c CLUSTER_ID (or a live JobManager with -m HOST:PORT); see --help")
	}
	var rd logReader
	if !c.Bool("archive") {
		if c.String(flagJobManager) != "" {
			cl, err := restClient(c)
			if err != nil {
				return err
			}
			rd = liveLogs{cl}
		} else if addr, err := clusterRESTAddress(c, cfg, log, id); err == nil {
			opts, err := client.ConfigOptions(cfg)
			if err != nil {
				return err
			}
			cl, err := client.New(addr, opts...)
			if err != nil {
				return err
			}
			rd = liveLogs{cl}
		} else if !errors.Is(err, providers.ErrClusterNotFound) {
			log.Debug().Err(err).Msg("the cluster cannot be reached; reading its archive")
		}
	}
	if rd == nil {
		if id == "" {
			return errors.New("logs: the JobManager does not answer and without -c CLUSTER_ID there is no archive to read")
		}
		a, err := logs.OpenArchive(c.Context, cfg, id)
		if err != nil {
			return fmt.Errorf("logs: %w", err)
		}
		defer a.Close()
		rd = archivedLogs{a}
	}
	ctx := c.Context
	refs, err := rd.list(ctx, job, tm)
	if err != nil {
		return fmt.Errorf("logs: %s: %w", rd.where(), err)
	}
	if c.Bool("list") {
		tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "PROCESS\tFILE\tSIZE")
		for _, r := range refs {
			p := r.TM
			if p == "" {
				p = string(logs.JobManagerProcess)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\n", p, r.Name, r.Size)
		}
		return tw.Flush()
	}
	refs = pickLogs(refs, job, tm, c.String("file"))
	if len(refs) == 0 {
		return fmt.Errorf("logs: no such log in %s (see --list)", rd.where())
	}
	offsets := make([]int64, len(refs))
	for i, r := range refs {
		if len(refs) > 1 {
			fmt.Fprintf(c.App.Writer, "==> %s <==\n", r.label())
		}
		n, err := copyLog(ctx, c.App.Writer, rd, r, c.Int("tail"))
		if err != nil {
			return fmt.Errorf("logs: %s in %s: %w", r.label(), rd.where(), err)
		}
		offsets[i] = n
	}
	if !c.Bool("follow") {
		return nil
	}
	live, ok := rd.(liveLogs)
	if !ok {
		return nil // an archive does not grow
	}
	fctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return followLogs(fctx, c.App.Writer, live, refs, offsets)
}

// pickLogs selects what to print: --file, else the runner .log files of
// --job, else the TaskManager's or JobManager's own log.
func pickLogs(refs []logRef, job, tm, file string) []logRef {
	var out []logRef
	for _, r := range refs {
		switch {
		case job != "":
			ext := ".log"
			if file != "" {
				ext = "." + file
			}
			if r.Name == logs.RunnerLogName(job, ext) || r.Name == file {
				out = append(out, r)
			}
		case file != "":
			if r.Name == file {
				out = append(out, r)
			}
		case tm != "":
			if r.Name == logs.TaskManagerLog {
				out = append(out, r)
			}
		default:
			if r.TM == "" && r.Name == logs.JobManagerLog {
				out = append(out, r)
			}
		}
	}
	return out
}

// copyLog prints a whole log (or its tail) in bounded pieces and returns
// the offset reached.
func copyLog(ctx context.Context, w io.Writer, rd logReader, ref logRef, tail int) (int64, error) {
	if tail > 0 {
		b, err := rd.read(ctx, ref, logs.Range{Tail: tail})
		if err != nil {
			return 0, err
		}
		_, err = w.Write(b)
		return ref.Size, err // a follower goes on from the size listed
	}
	const piece = 4 << 20
	var off int64
	for {
		b, err := rd.read(ctx, ref, logs.Range{Offset: off, Length: piece})
		if err != nil {
			return off, err
		}
		if _, err := w.Write(b); err != nil {
			return off, err
		}
		off += int64(len(b))
		if len(b) < piece {
			return off, nil
		}
	}
}

// followLogs polls live logs for what they append, until ctx ends or the
// cluster stops answering.
func followLogs(ctx context.Context, w io.Writer, rd liveLogs, refs []logRef, offsets []int64) error {
	last := -1
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(500 * time.Millisecond):
		}
		for i, r := range refs {
			b, err := rd.read(ctx, r, logs.Range{Offset: offsets[i]})
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				fmt.Fprintf(w, "==> %s: no longer readable live (%v); gofl logs reads the archive once the cluster is gone <==\n", r.label(), err)
				return nil
			}
			if len(b) == 0 {
				continue
			}
			if len(refs) > 1 && last != i {
				fmt.Fprintf(w, "==> %s <==\n", r.label())
			}
			last = i
			_, _ = w.Write(b)
			offsets[i] += int64(len(b))
		}
	}
}

type liveLogs struct{ cl *client.Client }

func (l liveLogs) where() string { return "the JobManager at " + l.cl.Address() }

func (l liveLogs) list(ctx context.Context, job, tm string) ([]logRef, error) {
	var out []logRef
	if job != "" && tm == "" {
		jl, err := l.cl.JobLogs(ctx, job)
		if err != nil {
			return nil, err
		}
		for _, f := range jl.Logs {
			out = append(out, logRef{TM: f.TaskManager, Name: f.Name, Size: f.Size})
		}
		return out, nil
	}
	if tm == "" {
		ll, err := l.cl.JobManagerLogs(ctx)
		if err != nil {
			return nil, err
		}
		for _, f := range ll.Logs {
			out = append(out, logRef{Name: f.Name, Size: f.Size})
		}
	}
	tms := []string{tm}
	if tm == "" {
		all, err := l.cl.TaskManagers(ctx)
		if err != nil {
			return nil, err
		}
		tms = tms[:0]
		for _, t := range all.TaskManagers {
			tms = append(tms, t.ID)
		}
	}
	for _, t := range tms {
		ll, err := l.cl.TaskManagerLogs(ctx, t)
		if err != nil {
			return nil, err
		}
		for _, f := range ll.Logs {
			if job == "" || logs.IsRunnerLogOf(f.Name, job) {
				out = append(out, logRef{TM: t, Name: f.Name, Size: f.Size})
			}
		}
	}
	return out, nil
}

func (l liveLogs) read(ctx context.Context, ref logRef, r logs.Range) ([]byte, error) {
	return l.cl.ReadLog(ctx, client.LogPath(ref.TM, ref.Name), r)
}

type archivedLogs struct{ a *logs.Archive }

func (a archivedLogs) where() string { return "the log archive " + a.a.URI("", "") }

func (a archivedLogs) list(ctx context.Context, job, tm string) ([]logRef, error) {
	procs, err := a.a.Processes(ctx)
	if err != nil {
		return nil, err
	}
	var out []logRef
	for _, p := range procs {
		id := p.TaskManagerID()
		if tm != "" && id != tm || job != "" && id == "" {
			continue
		}
		files, err := a.a.List(ctx, p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if job == "" || logs.IsRunnerLogOf(f.Name, job) {
				out = append(out, logRef{TM: id, Name: f.Name, Size: f.Size})
			}
		}
	}
	return out, nil
}

func (a archivedLogs) read(ctx context.Context, ref logRef, r logs.Range) ([]byte, error) {
	proc := logs.JobManagerProcess
	if ref.TM != "" {
		p, err := logs.TaskManagerProcess(ref.TM)
		if err != nil {
			return nil, err
		}
		proc = p
	}
	rc, err := a.a.Open(ctx, proc, ref.Name)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, err
	}
	br := bytes.NewReader(b)
	start, n, err := r.Bounds(br, int64(len(b)))
	if err != nil {
		return nil, err
	}
	return b[start : start+n], nil
}

// logsHint is how to read a cluster's logs, for messages after a failure.
func logsHint(cfg *conf.Configuration, clusterID, jobID string) string {
	cmd := "gofl logs -c " + clusterID
	if jobID != "" {
		cmd += " --job " + jobID
	}
	if uri, err := logs.RootURI(cfg, clusterID); err == nil {
		return fmt.Sprintf("%s (archived under %s)", cmd, uri)
	}
	return cmd
}
