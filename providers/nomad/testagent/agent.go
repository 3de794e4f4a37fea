package testagent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rs/zerolog"
)

// Config configures a test agent. Zero values take the documented defaults.
type Config struct {
	// Addr is the HTTP listen address. Default 127.0.0.1:4646 (Nomad's
	// default HTTP port). Use 127.0.0.1:0 in tests.
	Addr string
	// DataDir holds the allocation directories. Empty means a temporary
	// directory that Close removes.
	DataDir string
	// NodeCPU is the node's CPU capacity in MHz. Default 4000.
	NodeCPU int
	// NodeMemoryMB is the node's memory capacity in MB. Default 8192.
	NodeMemoryMB int
	// Datacenter of the single node. Default "dc1".
	Datacenter string
	// Region of the agent. Default "global".
	Region string
	// NodeName is the node's name. Default the host name.
	NodeName string
	// NodeMeta is the node's client meta (${meta.KEY} in constraints).
	NodeMeta map[string]string
	// Namespaces created at start besides "default".
	Namespaces []string
	// ACLToken, when set, enables ACL enforcement: every request except
	// /v1/status/* must carry it in the X-Nomad-Token header (or as an
	// "Authorization: Bearer" token).
	ACLToken string
	// KillOnCloseTimeout bounds how long Close waits for processes after
	// SIGKILL. Default 5s.
	KillOnCloseTimeout time.Duration
	// StartLag is how long a task waits between Task Setup and Started,
	// as a real client takes 0.35-1 s from register to running. Default
	// 350ms; negative means none.
	StartLag time.Duration
}

func (c *Config) defaults() {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:4646"
	}
	if c.NodeCPU == 0 {
		c.NodeCPU = 4000
	}
	if c.NodeMemoryMB == 0 {
		c.NodeMemoryMB = 8192
	}
	if c.Datacenter == "" {
		c.Datacenter = "dc1"
	}
	if c.Region == "" {
		c.Region = "global"
	}
	if c.NodeName == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "testagent"
		}
		c.NodeName = h
	}
	if c.KillOnCloseTimeout == 0 {
		c.KillOnCloseTimeout = 5 * time.Second
	}
	if c.StartLag == 0 {
		c.StartLag = 350 * time.Millisecond
	}
}

// Agent is an in-process stand-in for a single Nomad agent running in -dev
// mode (server and client in one process, one node).
type Agent struct {
	cfg     Config
	log     zerolog.Logger
	tmpDir  bool
	nodeID  string
	started time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // allocation runners and the HTTP server

	ln  net.Listener
	srv *http.Server

	mu         sync.Mutex
	closed     bool
	index      uint64
	tables     map[string]uint64
	notify     chan struct{}
	node       *api.Node
	namespaces map[string]*api.Namespace
	jobs       map[jobKey]*jobState
	allocs     map[string]*allocState
	evals      map[string]*api.Evaluation
	// deleted records, per job, the index at which allocations or
	// evaluations of that job were last removed (purge, GC), so blocking
	// queries on the job's allocations wake on removals too.
	deleted map[jobKey]uint64
	events  *eventBroker
	// retrying guards retryBlockedLocked against re-entry.
	retrying bool
}

type jobKey struct{ ns, id string }

type jobState struct {
	job *api.Job
	// spec is the job rendered without status, indexes and counts;
	// specVersion increases when it changes (a destructive update).
	spec        string
	specVersion int
}

// New creates an agent. It does not listen until Start.
func New(cfg Config, log zerolog.Logger) (*Agent, error) {
	cfg.defaults()
	tmp := false
	if cfg.DataDir == "" {
		tmp = true
		d, err := os.MkdirTemp("", "nomad-testagent-")
		if err != nil {
			return nil, err
		}
		cfg.DataDir = d
	} else if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	a := &Agent{
		cfg:        cfg,
		log:        log.With().Str("component", "nomad-testagent").Logger(),
		tmpDir:     tmp,
		nodeID:     newUUID(),
		tables:     map[string]uint64{},
		notify:     make(chan struct{}),
		namespaces: map[string]*api.Namespace{},
		jobs:       map[jobKey]*jobState{},
		allocs:     map[string]*allocState{},
		evals:      map[string]*api.Evaluation{},
		deleted:    map[jobKey]uint64{},
	}
	a.cfg.DataDir = abs
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.events = newEventBroker()
	a.index = 1
	a.addNamespaceLocked(api.DefaultNamespace, "Default shared namespace")
	for _, ns := range cfg.Namespaces {
		a.addNamespaceLocked(ns, "")
	}
	a.node = a.buildNode()
	a.tables["nodes"] = a.node.ModifyIndex
	return a, nil
}

func (a *Agent) addNamespaceLocked(name, desc string) {
	idx := a.bumpLocked("namespaces")
	a.namespaces[name] = &api.Namespace{Name: name, Description: desc, CreateIndex: idx, ModifyIndex: idx}
}

// Start listens on Config.Addr and serves the HTTP API until Close or ctx
// is done.
func (a *Agent) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", a.cfg.Addr)
	if err != nil {
		return fmt.Errorf("nomad testagent: listen %s: %w", a.cfg.Addr, err)
	}
	a.ln = ln
	a.started = time.Now()
	a.mu.Lock()
	a.node.HTTPAddr = ln.Addr().String()
	a.mu.Unlock()
	a.srv = &http.Server{Handler: a, ReadHeaderTimeout: 10 * time.Second}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		if err := a.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error().Err(err).Msg("http server stopped")
		}
	}()
	if ctx != nil && ctx.Done() != nil {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			select {
			case <-ctx.Done():
				go a.Close() //nolint:errcheck // Close is idempotent.
			case <-a.ctx.Done():
			}
		}()
	}
	a.log.Info().Str("addr", ln.Addr().String()).Str("data_dir", a.cfg.DataDir).Msg("nomad test agent started")
	return nil
}

// Addr is the listen address (host:port), valid after Start.
func (a *Agent) Addr() string {
	if a.ln == nil {
		return a.cfg.Addr
	}
	return a.ln.Addr().String()
}

// URL is "http://" + Addr(), suitable for NOMAD_ADDR.
func (a *Agent) URL() string { return "http://" + a.Addr() }

// DataDir is the directory holding allocation directories.
func (a *Agent) DataDir() string { return a.cfg.DataDir }

// NodeID is the ID of the agent's single node.
func (a *Agent) NodeID() string { return a.nodeID }

// Close stops the HTTP server, kills (SIGKILL, process group) every process
// the agent started and waits for them. It is idempotent.
func (a *Agent) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		a.wg.Wait()
		return nil
	}
	a.closed = true
	a.events.close()
	a.mu.Unlock()
	a.cancel()
	var err error
	if a.srv != nil {
		err = a.srv.Close()
	}
	a.wg.Wait()
	if a.tmpDir {
		_ = os.RemoveAll(a.cfg.DataDir)
	}
	return err
}

// bumpLocked advances the raft-like index, records it for the given
// tables and wakes blocking queries. a.mu must be held.
func (a *Agent) bumpLocked(tables ...string) uint64 {
	a.index++
	for _, t := range tables {
		a.tables[t] = a.index
	}
	close(a.notify)
	a.notify = make(chan struct{})
	return a.index
}

func (a *Agent) tableIndexLocked(tables ...string) uint64 {
	var m uint64
	for _, t := range tables {
		if a.tables[t] > m {
			m = a.tables[t]
		}
	}
	if m == 0 {
		m = 1
	}
	return m
}

func (a *Agent) buildNode() *api.Node {
	cfg := a.cfg
	host, _ := os.Hostname()
	attrs := map[string]string{
		"kernel.name":               runtime.GOOS,
		"os.name":                   runtime.GOOS,
		"cpu.arch":                  runtime.GOARCH,
		"arch":                      runtime.GOARCH,
		"cpu.numcores":              strconv.Itoa(runtime.NumCPU()),
		"cpu.totalcompute":          strconv.Itoa(cfg.NodeCPU),
		"memory.totalbytes":         strconv.FormatInt(int64(cfg.NodeMemoryMB)*1024*1024, 10),
		"unique.hostname":           host,
		"unique.network.ip-address": "127.0.0.1",
		"nomad.version":             Version,
		"nomad.advertise.address":   cfg.Addr,
		"driver.raw_exec":           "1",
		"driver.exec":               "1",
	}
	now := time.Now()
	drivers := map[string]*api.DriverInfo{}
	for _, d := range []string{"raw_exec", "exec"} {
		drivers[d] = &api.DriverInfo{Attributes: map[string]string{"driver." + d: "true"}, Detected: true, Healthy: true,
			HealthDescription: "Healthy", UpdateTime: now}
	}
	meta := map[string]string{}
	for k, v := range cfg.NodeMeta {
		meta[k] = v
	}
	idx := a.bumpLocked("nodes")
	return &api.Node{
		ID:         a.nodeID,
		Datacenter: cfg.Datacenter,
		Name:       cfg.NodeName,
		HTTPAddr:   cfg.Addr,
		Attributes: attrs,
		NodeResources: &api.NodeResources{
			Cpu:            api.NodeCpuResources{CpuShares: int64(cfg.NodeCPU), TotalCpuCores: uint16(runtime.NumCPU())},
			Memory:         api.NodeMemoryResources{MemoryMB: int64(cfg.NodeMemoryMB)},
			Networks:       []*api.NetworkResource{{Mode: "host", Device: "lo", CIDR: "127.0.0.1/32", IP: "127.0.0.1"}},
			MinDynamicPort: 20000,
			MaxDynamicPort: 32000,
		},
		ReservedResources:     &api.NodeReservedResources{},
		Meta:                  meta,
		NodePool:              "default",
		SchedulingEligibility: "eligible",
		Status:                "ready",
		StatusDescription:     "",
		StatusUpdatedAt:       now.Unix(),
		Drivers:               drivers,
		CreateIndex:           idx,
		ModifyIndex:           idx,
	}
}

// Version is the Nomad version the agent reports (the HTTP API generation
// whose behaviour it mimics).
const Version = "1.10.0-testagent"

func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
