package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/providers"
	_ "github.com/gofl/gofl/providers/local" // registers the local provider
	"github.com/gofl/gofl/storage"
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
that no longer run are forgotten.

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

func newDeployer(cfg *conf.Configuration, log zerolog.Logger, target string) (providers.ClusterDeployer, error) {
	d, err := providers.NewDeployer(target, cfg, log)
	if err != nil {
		return nil, fmt.Errorf("-t %s: %w", target, err)
	}
	return d, nil
}

func newClusterID(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// goflBinary is the gofl binary clusters run: deployment.binary, else
// this executable.
func goflBinary(cfg *conf.Configuration) (string, error) {
	if b := conf.DeploymentBinary.Get(cfg); b != "" {
		return filepath.Abs(b)
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("locating the gofl binary: %w (set deployment.binary)", err)
	}
	return exe, nil
}

// staged is what stageCluster put in the staging area.
type staged struct {
	st            *storage.Staging
	clusterID     string
	goflURI       string
	jobKey        string
	jobURI        string
	jobUploaded   bool
	goflUploaded  bool
	configURI     string
	jobGraphURI   string
	stagingDirURI string
}

// stageCluster puts the gofl binary and the job binary (if any) in the
// blob cache and the configuration snapshot in the cluster's directory.
// On error it removes the cluster's directory again.
func stageCluster(ctx context.Context, cfg *conf.Configuration, clusterID, goflBin, jobBin string) (_ *staged, err error) {
	dir := conf.ExpandEnv(conf.StagingDir.Get(cfg))
	st, err := storage.OpenStaging(ctx, dir, storage.OptionsFromConf(cfg))
	if err != nil {
		return nil, fmt.Errorf("staging (staging.dir %s): %w", dir, err)
	}
	s := &staged{st: st, clusterID: clusterID, stagingDirURI: dir}
	defer func() {
		if err != nil {
			s.cleanup()
			st.Close()
		}
	}()
	key, written, err := st.PutBlobFile(ctx, goflBin)
	if err != nil {
		return nil, fmt.Errorf("staging the gofl binary: %w", err)
	}
	s.goflUploaded = written
	if s.goflURI, err = st.BlobURI(key); err != nil {
		return nil, err
	}
	if jobBin != "" {
		if s.jobKey, s.jobUploaded, err = st.PutBlobFile(ctx, jobBin); err != nil {
			return nil, fmt.Errorf("staging the job binary: %w", err)
		}
		if s.jobURI, err = st.BlobURI(s.jobKey); err != nil {
			return nil, err
		}
	}
	y, err := yaml.Marshal(cfg.Snapshot())
	if err != nil {
		return nil, err
	}
	if err := st.PutConfig(ctx, clusterID, y); err != nil {
		return nil, fmt.Errorf("staging the configuration: %w", err)
	}
	cdir, _ := st.ClusterDir(clusterID)
	s.configURI = st.FileSystem().URI(cdir + "/" + storage.ConfigFile)
	return s, nil
}

func (s *staged) putJobGraph(ctx context.Context, b []byte) error {
	if err := s.st.PutJobGraph(ctx, s.clusterID, b); err != nil {
		return fmt.Errorf("staging the JobGraph: %w", err)
	}
	cdir, _ := s.st.ClusterDir(s.clusterID)
	s.jobGraphURI = s.st.FileSystem().URI(cdir + "/" + storage.JobGraphFile)
	return nil
}

// cleanup removes the cluster's staging directory (idempotent).
func (s *staged) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = s.st.RemoveCluster(ctx, s.clusterID)
}

// removeStagingOf removes a cluster's staging directory, for `session stop`.
func removeStagingOf(ctx context.Context, cfg *conf.Configuration, clusterID string) error {
	st, err := storage.OpenStaging(ctx, conf.ExpandEnv(conf.StagingDir.Get(cfg)), storage.OptionsFromConf(cfg))
	if err != nil {
		return err
	}
	defer st.Close()
	return st.RemoveCluster(ctx, clusterID)
}

// clusterConfig is the configuration a deployed JobManager gets: the
// client's settings plus the deployment's.
func clusterConfig(cfg *conf.Configuration, extra map[string]string) map[string]string {
	out := cfg.Snapshot()
	delete(out, conf.DeploymentBinary.Key())
	// Expanded here: $HOME on a Nomad node is the agent's, not the client's.
	out[conf.StagingDir.Key()] = conf.ExpandEnv(conf.StagingDir.Get(cfg))
	for k, v := range extra {
		out[k] = v
	}
	return out
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
	dep, err := newDeployer(cfg, log, target)
	if err != nil {
		return fmt.Errorf("session start: %w", err)
	}
	id := c.String("name")
	if id == "" {
		id = newClusterID("session")
	}
	if err := storage.ValidateClusterID(id); err != nil {
		return fmt.Errorf("session start: --name: %w", err)
	}
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
	defer cancel()
	bin, err := goflBinary(cfg)
	if err != nil {
		return fmt.Errorf("session start: %w", err)
	}
	// A running cluster of that name keeps its staging directory: refuse
	// before staging anything into it.
	if c.String("name") != "" {
		if info, err := dep.Retrieve(ctx, id); err == nil && info.Status != providers.StatusTerminated {
			return fmt.Errorf("session start: %w: %s (%s)", providers.ErrClusterExists, id, info.Status)
		}
	}
	s, err := stageCluster(ctx, cfg, id, bin, "")
	if err != nil {
		return fmt.Errorf("session start: %w", err)
	}
	defer s.st.Close()
	info, err := dep.Deploy(ctx, providers.ClusterSpec{
		ClusterID: id, Mode: providers.ModeSession, Binary: bin, Artifacts: []string{s.goflURI},
		TaskManagers: c.Int("taskmanagers"),
		JobManagers:  c.Int("jobmanagers"),
		Config:       clusterConfig(cfg, map[string]string{conf.DeploymentMode.Key(): conf.ModeSession}),
	})
	if err != nil {
		if !errors.Is(err, providers.ErrClusterExists) { // not ours to remove
			s.cleanup()
		}
		return fmt.Errorf("session start: %w", err)
	}
	st, err := loadSessions(c)
	if err != nil {
		log.Warn().Err(err).Msg("the session state is unreadable; starting it anew")
		st = sessionState{}
	}
	st.remove(id)
	st.Sessions = append(st.Sessions, sessionRecord{ClusterID: id, Provider: target, RESTAddress: info.RESTAddress, Created: time.Now().UTC()})
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
	dep, err := newDeployer(cfg, log, target)
	if err != nil {
		return fmt.Errorf("session list: %w", err)
	}
	infos, err := dep.List(c.Context)
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
	tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER ID\tPROVIDER\tMODE\tSTATUS\tREST\tCREATED\t")
	for _, i := range infos {
		id := i.ClusterID
		if id == st.Latest {
			id += " *"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\thttp://%s\t%s\t\n", id, i.Provider, i.Mode, i.Status, i.RESTAddress, i.Created.Local().Format(time.DateTime))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(infos) == 0 {
		fmt.Fprintln(c.App.Writer, "(no clusters)")
	}
	return nil
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
	dep, err := newDeployer(cfg, log, target)
	if err != nil {
		return fmt.Errorf("session stop: %w", err)
	}
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
	defer cancel()
	kerr := dep.Kill(ctx, id)
	if kerr != nil && !errors.Is(kerr, providers.ErrClusterNotFound) {
		return fmt.Errorf("session stop: %w", kerr)
	}
	if err := removeStagingOf(ctx, cfg, id); err != nil {
		return fmt.Errorf("session stop: removing the staging directory of %s: %w", id, err)
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
	dep, err := newDeployer(cfg, log, target)
	if err != nil {
		return "", err
	}
	info, err := dep.Retrieve(c.Context, id)
	if err != nil {
		return "", err
	}
	if info.Status == providers.StatusTerminated {
		return "", fmt.Errorf("%w: %s has terminated", providers.ErrClusterNotFound, id)
	}
	return providers.LeaderRESTAddress(c.Context, &http.Client{Timeout: 5 * time.Second}, info.RESTAddress), nil
}
