package nomad

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/gofl/gofl/conf"
)

// Name is the provider's registry name.
const Name = "nomad"

// Drivers a task may use.
const (
	DriverRawExec = "raw_exec"
	DriverExec    = "exec"
)

// Configuration keys, defined in package conf (provider.nomad.*).
var (
	OptAddress           = conf.NomadAddress
	OptNamespace         = conf.NomadNamespace
	OptRegion            = conf.NomadRegion
	OptDatacenters       = conf.NomadDatacenters
	OptToken             = conf.NomadToken
	OptTLSCACert         = conf.NomadTLSCACert
	OptTLSClientCert     = conf.NomadTLSClientCert
	OptTLSClientKey      = conf.NomadTLSClientKey
	OptTLSInsecure       = conf.NomadTLSInsecure
	OptJobManagerCPU     = conf.NomadJobManagerCPU
	OptJobManagerMemory  = conf.NomadJobManagerMemory
	OptTaskManagerCPU    = conf.NomadTaskManagerCPU
	OptTaskManagerMemory = conf.NomadTaskManagerMemory
	OptMHzPerCore        = conf.NomadMHzPerCore
	OptConstraints       = conf.NomadConstraints
	OptJMConstraints     = conf.NomadJobManagerConstraints
	OptTMConstraints     = conf.NomadTaskManagerConstraints
	OptNodePool          = conf.NomadNodePool
	OptDriver            = conf.NomadDriver
	OptBinaryPath        = conf.NomadBinaryPath
	OptBinaryURL         = conf.NomadBinaryURL
	OptBinarySHA256      = conf.NomadBinarySHA256
	OptKillTimeout       = conf.NomadKillTimeout
)

// Options configure the provider's two halves.
type Options struct {
	// Address of the Nomad HTTP API.
	Address string
	// Namespace and Region of the jobs; empty: the agent's defaults.
	Namespace, Region string
	// Datacenters the jobs may run in.
	Datacenters []string
	// Token is the ACL token; never logged.
	Token string
	// TLS client settings.
	CACert, ClientCert, ClientKey string
	Insecure                      bool
	// JobManagerCPU (MHz) and JobManagerMemoryMB of JobManager tasks.
	JobManagerCPU, JobManagerMemoryMB int
	// TaskManagerCPU (MHz) and TaskManagerMemoryMB of TaskManager tasks
	// whose WorkerSpec leaves them 0; MHzPerCore converts WorkerSpec.CPU.
	TaskManagerCPU, TaskManagerMemoryMB int
	MHzPerCore                          int
	// Constraints on every job; JobManagerConstraints and
	// TaskManagerConstraints on the jobs of one role only.
	Constraints, JobManagerConstraints, TaskManagerConstraints []*api.Constraint
	// NodePool of every job; "" is Nomad's default pool.
	NodePool string
	// Driver is raw_exec or exec.
	Driver string
	// BinaryPath is the gofl binary on the nodes; BinaryURL (with
	// BinarySHA256) is fetched through an artifact stanza instead.
	BinaryPath, BinaryURL, BinarySHA256 string
	// KillTimeout between the kill signal and SIGKILL.
	KillTimeout time.Duration
}

// OptionsFromConfig reads the provider.nomad.* keys (see the Opt*
// variables), falling back to the NOMAD_* environment variables the
// Nomad CLI reads.
func OptionsFromConfig(c *conf.Configuration) (Options, error) {
	env := func(v, name string) string {
		if v == "" {
			return os.Getenv(name)
		}
		return v
	}
	o := Options{
		Address:             env(OptAddress.Get(c), "NOMAD_ADDR"),
		Namespace:           env(OptNamespace.Get(c), "NOMAD_NAMESPACE"),
		Region:              env(OptRegion.Get(c), "NOMAD_REGION"),
		Token:               env(OptToken.Get(c), "NOMAD_TOKEN"),
		CACert:              env(OptTLSCACert.Get(c), "NOMAD_CACERT"),
		ClientCert:          env(OptTLSClientCert.Get(c), "NOMAD_CLIENT_CERT"),
		ClientKey:           env(OptTLSClientKey.Get(c), "NOMAD_CLIENT_KEY"),
		Insecure:            OptTLSInsecure.Get(c),
		JobManagerCPU:       OptJobManagerCPU.Get(c),
		JobManagerMemoryMB:  toMB(OptJobManagerMemory.Get(c)),
		TaskManagerCPU:      OptTaskManagerCPU.Get(c),
		TaskManagerMemoryMB: toMB(OptTaskManagerMemory.Get(c)),
		MHzPerCore:          OptMHzPerCore.Get(c),
		Driver:              OptDriver.Get(c),
		BinaryPath:          OptBinaryPath.Get(c),
		BinaryURL:           OptBinaryURL.Get(c),
		BinarySHA256:        OptBinarySHA256.Get(c),
		KillTimeout:         OptKillTimeout.Get(c),
	}
	if o.Address == "" {
		o.Address = "http://127.0.0.1:4646"
	}
	if o.BinaryPath == "" && o.BinaryURL == "" {
		o.BinaryPath = conf.DeploymentBinary.Get(c)
	}
	for _, dc := range strings.Split(OptDatacenters.Get(c), ",") {
		if dc = strings.TrimSpace(dc); dc != "" {
			o.Datacenters = append(o.Datacenters, dc)
		}
	}
	for _, x := range []struct {
		opt *conf.Option[string]
		to  *[]*api.Constraint
	}{{OptConstraints, &o.Constraints}, {OptJMConstraints, &o.JobManagerConstraints}, {OptTMConstraints, &o.TaskManagerConstraints}} {
		cs, err := ParseConstraints(x.opt.Get(c))
		if err != nil {
			return Options{}, fmt.Errorf("%s: %w", x.opt.Key(), err)
		}
		*x.to = cs
	}
	o.NodePool = OptNodePool.Get(c)
	return o, o.validate()
}

func toMB(m conf.MemorySize) int { return int((int64(m) + (1 << 20) - 1) >> 20) }

func (o *Options) validate() error {
	var errs []error
	if o.Driver == "" {
		o.Driver = DriverRawExec
	}
	if o.Driver != DriverRawExec && o.Driver != DriverExec {
		errs = append(errs, fmt.Errorf("driver %q is not raw_exec or exec", o.Driver))
	}
	if len(o.Datacenters) == 0 {
		o.Datacenters = []string{"*"}
	}
	if o.KillTimeout <= 0 {
		o.KillTimeout = 10 * time.Second
	}
	if o.MHzPerCore <= 0 {
		o.MHzPerCore = 1000
	}
	if o.JobManagerCPU <= 0 {
		o.JobManagerCPU = 500
	}
	if o.JobManagerMemoryMB <= 0 {
		o.JobManagerMemoryMB = 512
	}
	if o.TaskManagerCPU <= 0 {
		o.TaskManagerCPU = 1000
	}
	if o.TaskManagerMemoryMB <= 0 {
		o.TaskManagerMemoryMB = 1024
	}
	if o.BinaryURL != "" {
		if err := checkBinaryURL(o.BinaryURL, o.BinarySHA256); err != nil {
			errs = append(errs, err)
		}
	}
	if u, err := url.Parse(o.Address); err != nil || u.Host == "" && u.Scheme != "unix" {
		errs = append(errs, fmt.Errorf("address %q is not a URL like http://host:4646", o.Address))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("nomad: invalid provider.nomad options: %w", err)
	}
	return nil
}

var sha256Hex = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

func checkBinaryURL(u, sum string) error {
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") {
		return fmt.Errorf("binary URL %q: only http and https URLs can be fetched (serve HDFS files through WebHDFS ...?op=OPEN)", u)
	}
	if !sha256Hex.MatchString(sum) {
		return fmt.Errorf("binary URL %q needs provider.nomad.binary.sha256 (64 hex digits), got %q", u, sum)
	}
	return nil
}

// forward is the configuration a deployed JobManager needs to run its
// worker driver with the same options; the token is not in it (it goes
// to the task environment).
func (o Options) forward() map[string]string {
	m := map[string]string{
		OptAddress.Key():           o.Address,
		OptDatacenters.Key():       strings.Join(o.Datacenters, ","),
		OptTLSInsecure.Key():       fmt.Sprint(o.Insecure),
		OptTaskManagerCPU.Key():    fmt.Sprint(o.TaskManagerCPU),
		OptTaskManagerMemory.Key(): fmt.Sprintf("%dm", o.TaskManagerMemoryMB),
		OptMHzPerCore.Key():        fmt.Sprint(o.MHzPerCore),
		OptDriver.Key():            o.Driver,
		OptKillTimeout.Key():       o.KillTimeout.String(),
		OptJobManagerCPU.Key():     fmt.Sprint(o.JobManagerCPU),
		OptJobManagerMemory.Key():  fmt.Sprintf("%dm", o.JobManagerMemoryMB),
	}
	set := func(k *conf.Option[string], v string) {
		if v != "" {
			m[k.Key()] = v
		}
	}
	set(OptNamespace, o.Namespace)
	set(OptRegion, o.Region)
	set(OptTLSCACert, o.CACert)
	set(OptTLSClientCert, o.ClientCert)
	set(OptTLSClientKey, o.ClientKey)
	set(OptBinaryPath, o.BinaryPath)
	set(OptBinaryURL, o.BinaryURL)
	set(OptBinarySHA256, o.BinarySHA256)
	set(OptConstraints, FormatConstraints(o.Constraints))
	set(OptJMConstraints, FormatConstraints(o.JobManagerConstraints))
	set(OptTMConstraints, FormatConstraints(o.TaskManagerConstraints))
	set(OptNodePool, o.NodePool)
	return m
}

// ParseConstraints parses "<attribute> <operator> [value]" constraints
// separated by ';'. An attribute without ${} (attr.kernel.name) gets it.
func ParseConstraints(s string) ([]*api.Constraint, error) {
	var out []*api.Constraint
	for _, part := range strings.Split(s, ";") {
		f := strings.Fields(part)
		if len(f) == 0 {
			continue
		}
		if len(f) < 2 {
			return nil, fmt.Errorf("nomad: constraint %q: want \"<attribute> <operator> [value]\"", strings.TrimSpace(part))
		}
		l := f[0]
		if !strings.HasPrefix(l, "${") {
			l = "${" + l + "}"
		}
		out = append(out, api.NewConstraint(l, f[1], strings.Join(f[2:], " ")))
	}
	return out, nil
}

// FormatConstraints is ParseConstraints' inverse, without ${} so that the
// text survives Nomad's interpolation of task arguments.
func FormatConstraints(cs []*api.Constraint) string {
	var parts []string
	for _, c := range cs {
		l := strings.TrimSuffix(strings.TrimPrefix(c.LTarget, "${"), "}")
		parts = append(parts, strings.TrimSpace(l+" "+c.Operand+" "+c.RTarget))
	}
	return strings.Join(parts, "; ")
}

// Sentinel errors, wrapped by the errors the provider returns.
var (
	// ErrUnreachable: the Nomad API did not answer (connection refused,
	// timeout, DNS).
	ErrUnreachable = errors.New("nomad: API unreachable")
	// ErrPermissionDenied: Nomad's ACLs refused the request (403).
	ErrPermissionDenied = errors.New("nomad: permission denied")
	// ErrPlacement: the scheduler could not place a job (resources,
	// constraints, drivers, datacenters).
	ErrPlacement = errors.New("nomad: placement failed")
	// ErrTaskFailed: a task failed to start or ended while being deployed.
	ErrTaskFailed = errors.New("nomad: task failed")
)

// Timeouts of API calls that do not block.
const (
	dialTimeout = 5 * time.Second
	callTimeout = 30 * time.Second
)

// client is the api client with the provider's error wrapping.
type client struct {
	api  *api.Client
	addr string
	ns   string
}

func newClient(o Options) (*client, error) {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   dialTimeout,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
	}
	hc := &http.Client{Transport: tr}
	tlsCfg := &api.TLSConfig{CACert: o.CACert, ClientCert: o.ClientCert, ClientKey: o.ClientKey, Insecure: o.Insecure}
	if err := api.ConfigureTLS(hc, tlsCfg); err != nil {
		return nil, fmt.Errorf("nomad: TLS configuration: %w", err)
	}
	c, err := api.NewClient(&api.Config{Address: o.Address, Namespace: o.Namespace, Region: o.Region, SecretID: o.Token, HttpClient: hc})
	if err != nil {
		return nil, fmt.Errorf("nomad: %w", err)
	}
	return &client{api: c, addr: o.Address, ns: o.Namespace}, nil
}

func (c *client) close() { c.api.Close() }

// q returns query options bound to ctx; with a wait index they block.
func q(ctx context.Context, index uint64, wait time.Duration) *api.QueryOptions {
	return (&api.QueryOptions{WaitIndex: index, WaitTime: wait}).WithContext(ctx)
}

func w(ctx context.Context) *api.WriteOptions { return (&api.WriteOptions{}).WithContext(ctx) }

// statusOf returns the HTTP status of an api error, or 0.
func statusOf(err error) int {
	var ure api.UnexpectedResponseError
	if errors.As(err, &ure) && ure.HasStatusCode() {
		return ure.StatusCode()
	}
	var urep *api.UnexpectedResponseError
	if errors.As(err, &urep) && urep.HasStatusCode() {
		return urep.StatusCode()
	}
	msg := err.Error()
	for _, code := range []int{400, 403, 404, 500} {
		if strings.Contains(msg, fmt.Sprintf("Unexpected response code: %d", code)) {
			return code
		}
	}
	return 0
}

func isNotFound(err error) bool { return err != nil && statusOf(err) == http.StatusNotFound }

// wrap turns an api error into one naming the agent and the operation.
func (c *client) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%w: nomad at %s did not answer %s in time: %w", ErrUnreachable, c.addr, op, err)
		}
		return fmt.Errorf("nomad: %s: %w", op, err)
	}
	switch statusOf(err) {
	case http.StatusForbidden:
		return fmt.Errorf("%w: nomad at %s refused %s: %v (set provider.nomad.token or NOMAD_TOKEN to an ACL token allowed to submit, read and deregister jobs in namespace %q)",
			ErrPermissionDenied, c.addr, op, err, c.nsName())
	case 0:
	default:
		return fmt.Errorf("nomad: %s at %s: %w", op, c.addr, err)
	}
	var ue *url.Error
	var oe *net.OpError
	if errors.As(err, &ue) || errors.As(err, &oe) || errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%w: nomad at %s (provider.nomad.address / NOMAD_ADDR): %s: %v", ErrUnreachable, c.addr, op, err)
	}
	return fmt.Errorf("nomad: %s at %s: %w", op, c.addr, err)
}

func (c *client) nsName() string {
	if c.ns == "" {
		return api.DefaultNamespace
	}
	return c.ns
}

// ping checks that the agent answers, within callTimeout.
func (c *client) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var leader string
	_, err := c.api.Raw().Query("/v1/status/leader", &leader, q(ctx, 0, 0))
	return c.wrap("GET /v1/status/leader", err)
}
