package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/providers"
)

const (
	flagTarget  = "target"
	flagCluster = "cluster"
)

func targetFlag() cli.Flag {
	return &cli.StringFlag{Name: flagTarget, Aliases: []string{"t"},
		Usage: "resource provider `NAME` (local or nomad; default: deployment.provider unless standalone, else local)"}
}

func clusterFlag() cli.Flag {
	return &cli.StringFlag{Name: flagCluster, Aliases: []string{"c"},
		Usage: "talk to the cluster `CLUSTER_ID` (its REST address comes from its provider)"}
}

func sessionCommand() *cli.Command {
	return &cli.Command{
		Name:  "session",
		Usage: "start, list and stop session clusters",
		Description: `A session cluster is a long-running JobManager (Dispatcher and an active
ResourceManager) deployed through a resource provider; jobs are submitted to
it with 'gofl run -m session'. gofl remembers the sessions it started in
$XDG_STATE_HOME/gofl/sessions.json ($HOME/.local/state/gofl/sessions.json);
the latest is the default cluster of 'gofl run -m session', 'list', 'info',
'cancel' and 'session stop'.

Examples:
   gofl session start -t local -n 2
   gofl session start --name analytics -D taskmanager.numberOfTaskSlots=4
   gofl session list
   gofl session stop analytics`,
		Subcommands: []*cli.Command{
			{
				Name:  "start",
				Usage: "deploy a session cluster",
				Description: `Stages the gofl binary (in the blob cache, <staging.dir>/.gofl/blobs/) and the
configuration (<staging.dir>/.gofl/<cluster-id>/gofl.yaml), deploys the
JobManager through the provider, waits until its REST API answers, and
prints the cluster ID and REST address. gofl remembers the session; the
latest is the default cluster of later commands. With -n the cluster keeps
N TaskManagers running; more start when jobs need slots.

Examples:
   gofl session start
   gofl session start -t local --name analytics -n 2
   gofl session start -D taskmanager.numberOfTaskSlots=4 -D staging.dir=hdfs://nn:8020/user/me`,
				Flags: []cli.Flag{
					targetFlag(),
					&cli.StringFlag{Name: "name", Usage: "cluster `ID` (default: session-<random>)"},
					&cli.IntFlag{Name: "taskmanagers", Aliases: []string{"n"}, Usage: "start `N` TaskManagers right away and keep them (more start on demand)"},
					&cli.IntFlag{Name: "jobmanagers", Value: 1, Usage: "run `N` JobManagers: one leads, the others stand by (needs -D high-availability.type=zookeeper)"},
					&cli.DurationFlag{Name: "timeout", Value: 2 * time.Minute, Usage: "give up deploying after `DURATION`"},
				},
				Action: runSessionStart,
			},
			{
				Name:  "list",
				Usage: "list running clusters",
				Description: `Lists the provider's running clusters of every mode (session, per-job,
application): ID, provider, mode, status, REST address and creation time.
The remembered default session is marked with *. Sessions gofl remembers
that no longer run are forgotten. A cluster whose JobManager was killed or
failed (without high availability, or out of restart attempts) is listed
as failed until 'gofl session stop' removes what is left of it.

Examples:
   gofl session list
   gofl session list -t nomad`,
				Flags:  []cli.Flag{targetFlag()},
				Action: runSessionList,
			},
			{
				Name:      "stop",
				Usage:     "stop a cluster and remove its staging directory",
				ArgsUsage: "[CLUSTER_ID]",
				Description: `Kills the cluster through its provider (the JobManager, its TaskManagers and
their jobs), removes its staging directory <staging.dir>/.gofl/CLUSTER_ID/
and forgets it. Without CLUSTER_ID it stops the remembered default session.

Examples:
   gofl session stop
   gofl session stop analytics`,
				Flags:  []cli.Flag{targetFlag(), &cli.DurationFlag{Name: "timeout", Value: time.Minute, Usage: "give up after `DURATION`"}},
				Action: runSessionStop,
			},
		},
	}
}

// --- remembered sessions ---

type sessionRecord struct {
	ClusterID   string    `json:"cluster_id"`
	Provider    string    `json:"provider"`
	RESTAddress string    `json:"rest_address"`
	Created     time.Time `json:"created"`
	// Parallelism is the session's parallelism.default when it was started
	// with one: jobs are planned on the client, which applies it.
	Parallelism int `json:"parallelism,omitempty"`
}

type sessionState struct {
	Latest   string          `json:"latest,omitempty"`
	Sessions []sessionRecord `json:"sessions"`
}

func getenv(c *cli.Context, key string) string {
	for _, kv := range environ(c) {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

func sessionStatePath(c *cli.Context) (string, error) {
	if d := getenv(c, "XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "gofl", "sessions.json"), nil
	}
	home := getenv(c, "HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("session state: %w", err)
		}
	}
	return filepath.Join(home, ".local", "state", "gofl", "sessions.json"), nil
}

func loadSessions(c *cli.Context) (sessionState, error) {
	var st sessionState
	p, err := sessionStatePath(c)
	if err != nil {
		return st, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	} else if err != nil {
		return st, fmt.Errorf("session state: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("session state %s: %w", p, err)
	}
	return st, nil
}

func saveSessions(c *cli.Context, st sessionState) error {
	p, err := sessionStatePath(c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("session state: %w", err)
	}
	b, _ := json.MarshalIndent(st, "", "  ")
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("session state: %w", err)
	}
	return os.Rename(tmp, p)
}

func (st *sessionState) find(id string) (sessionRecord, bool) {
	for _, s := range st.Sessions {
		if s.ClusterID == id {
			return s, true
		}
	}
	return sessionRecord{}, false
}

func (st *sessionState) remove(id string) {
	st.Sessions = slices.DeleteFunc(st.Sessions, func(s sessionRecord) bool { return s.ClusterID == id })
	if st.Latest == id {
		st.Latest = ""
		if n := len(st.Sessions); n > 0 {
			st.Latest = st.Sessions[n-1].ClusterID
		}
	}
}

// --- providers and staging ---

// targetName is -t, else deployment.provider unless standalone, else local.
func targetName(c *cli.Context, cfg *conf.Configuration) string {
	if t := c.String(flagTarget); t != "" {
		return t
	}
	if p := conf.DeploymentProvider.Get(cfg); p != providers.Standalone {
		return p
	}
	return "local"
}

// newDescriptor is the ClusterDescriptor of provider target.
func newDescriptor(cfg *conf.Configuration, log zerolog.Logger, target string) (*client.ClusterDescriptor, error) {
	d, err := client.NewClusterDescriptor(cfg, target, log)
	if err != nil {
		return nil, fmt.Errorf("-t %s: %w", target, err)
	}
	return d, nil
}

// --- commands ---

func runSessionStart(c *cli.Context) error {
	if c.Args().Present() {
		return fmt.Errorf("session start: unexpected argument %q; see --help", c.Args().First())
	}
	cfg, log, err := setup(c)
	if err != nil {
		return err
	}
	target := targetName(c, cfg)
	desc, err := newDescriptor(cfg, log, target)
	if err != nil {
		return fmt.Errorf("session start: %w", err)
	}
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
	defer cancel()
	cc, err := desc.DeploySessionCluster(ctx, client.SessionSpec{ClusterID: c.String("name"), TaskManagers: c.Int("taskmanagers"),
		JobManagers: c.Int("jobmanagers")})
	if err != nil {
		return fmt.Errorf("session start: %w", err)
	}
	id, info := cc.ClusterID(), cc.Info
	st, err := loadSessions(c)
	if err != nil {
		log.Warn().Err(err).Msg("the session state is unreadable; starting it anew")
		st = sessionState{}
	}
	st.remove(id)
	rec := sessionRecord{ClusterID: id, Provider: target, RESTAddress: info.RESTAddress, Created: time.Now().UTC()}
	if cfg.IsSet(conf.DefaultParallelism.Key()) {
		rec.Parallelism = conf.DefaultParallelism.Get(cfg)
	}
	st.Sessions = append(st.Sessions, rec)
	st.Latest = id
	if err := saveSessions(c, st); err != nil {
		log.Warn().Err(err).Msg("could not remember the session")
	}
	fmt.Fprintf(c.App.Writer, "Session cluster %s started (provider %s)\nREST at http://%s\n", id, target, info.RESTAddress)
	return nil
}

func runSessionList(c *cli.Context) error {
	cfg, log, err := setup(c)
	if err != nil {
		return err
	}
	target := targetName(c, cfg)
	desc, err := newDescriptor(cfg, log, target)
	if err != nil {
		return fmt.Errorf("session list: %w", err)
	}
	infos, err := desc.ListClusters(c.Context)
	if err != nil {
		return fmt.Errorf("session list: %w", err)
	}
	st, _ := loadSessions(c)
	// Forget sessions of this provider that are gone.
	changed := false
	for _, s := range slices.Clone(st.Sessions) {
		if s.Provider == target && !slices.ContainsFunc(infos, func(i providers.ClusterInfo) bool { return i.ClusterID == s.ClusterID }) {
			st.remove(s.ClusterID)
			changed = true
		}
	}
	if changed {
		_ = saveSessions(c, st)
	}
	if len(infos) == 0 {
		fmt.Fprintln(c.App.Writer, "no clusters")
		return nil
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER ID\tPROVIDER\tMODE\tSTATUS\tREST\tCREATED\t")
	for _, i := range infos {
		id := i.ClusterID
		if id == st.Latest {
			id += " *"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\thttp://%s\t%s\t\n", id, i.Provider, i.Mode, i.Status, i.RESTAddress, i.Created.Local().Format(time.DateTime))
	}
	return tw.Flush()
}

func runSessionStop(c *cli.Context) error {
	if c.NArg() > 1 {
		return errors.New("session stop: want at most one CLUSTER_ID; see --help")
	}
	cfg, log, err := setup(c)
	if err != nil {
		return err
	}
	st, err := loadSessions(c)
	if err != nil {
		return fmt.Errorf("session stop: %w", err)
	}
	id := c.Args().First()
	if id == "" {
		if id = st.Latest; id == "" {
			return errors.New("session stop: no CLUSTER_ID given and no remembered session; see gofl session list")
		}
	}
	target := targetName(c, cfg)
	if rec, ok := st.find(id); ok && !c.IsSet(flagTarget) {
		target = rec.Provider
	}
	desc, err := newDescriptor(cfg, log, target)
	if err != nil {
		return fmt.Errorf("session stop: %w", err)
	}
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
	defer cancel()
	kerr := desc.KillCluster(ctx, id)
	if kerr != nil && !errors.Is(kerr, providers.ErrClusterNotFound) {
		return fmt.Errorf("session stop: %w", kerr)
	}
	st.remove(id)
	if err := saveSessions(c, st); err != nil {
		log.Warn().Err(err).Msg("could not update the session state")
	}
	if kerr != nil {
		return fmt.Errorf("session stop: %w", kerr)
	}
	fmt.Fprintf(c.App.Writer, "Cluster %s stopped\n", id)
	return nil
}

// clusterRESTAddress resolves a cluster's REST address through its
// provider: the remembered provider of a session, else -t.
func clusterRESTAddress(c *cli.Context, cfg *conf.Configuration, log zerolog.Logger, id string) (string, error) {
	target := targetName(c, cfg)
	if st, err := loadSessions(c); err == nil {
		if rec, ok := st.find(id); ok && !c.IsSet(flagTarget) {
			target = rec.Provider
		}
	}
	desc, err := newDescriptor(cfg, log, target)
	if err != nil {
		return "", err
	}
	cc, err := desc.RetrieveCluster(c.Context, id)
	if err != nil {
		return "", err
	}
	return cc.Info.RESTAddress, nil
}
