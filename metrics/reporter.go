package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
)

// ErrNoFreePort is a reporter whose every configured port is taken.
var ErrNoFreePort = errors.New("metrics: no free port")

// Reporter is one configured Prometheus reporter.
type Reporter struct {
	Name  string
	Host  string
	Ports []int
}

// ReportersFromConf lists the Prometheus reporters c declares
// (metrics.reporter.<name>.factory.class), limited to metrics.reporters
// when that is set; host is where they bind when the reporter names none.
func ReportersFromConf(c *conf.Configuration, host string) ([]Reporter, error) {
	var only map[string]bool
	if s := strings.TrimSpace(conf.MetricsReporters.Get(c)); s != "" {
		only = map[string]bool{}
		for _, n := range strings.Split(s, ",") {
			only[strings.TrimSpace(n)] = true
		}
	}
	var out []Reporter
	for _, name := range conf.Names(c, conf.MetricsReporterFactory) {
		if only != nil && !only[name] {
			continue
		}
		ports, err := conf.ParsePortRanges(conf.MetricsReporterPort.For(name).Get(c))
		if err != nil {
			return nil, fmt.Errorf("metrics: metrics.reporter.%s.port: %w", name, err)
		}
		h := conf.MetricsReporterHost.For(name).Get(c)
		if h == "" {
			h = host
		}
		out = append(out, Reporter{Name: name, Host: h, Ports: ports})
	}
	return out, nil
}

// Server is a running reporter or profiler endpoint.
type Server struct {
	// Addr is the host:port it listens on.
	Addr string
	srv  *http.Server
	done chan struct{}
}

// Close stops the server and waits for it. Idempotent.
func (s *Server) Close() {
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	<-s.done
}

// StartReporters starts every reporter c declares for reg, each on the
// first free port of its range; the caller closes them. A reporter that
// finds no free port fails the start, naming its keys.
func StartReporters(c *conf.Configuration, host string, reg *prometheus.Registry, log zerolog.Logger) ([]*Server, error) {
	reps, err := ReportersFromConf(c, host)
	if err != nil {
		return nil, err
	}
	var out []*Server
	for _, r := range reps {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: logAdapter{log}, ErrorHandling: promhttp.ContinueOnError}))
		mux.Handle("/", http.RedirectHandler("/metrics", http.StatusFound))
		s, err := serve(r.Host, r.Ports, mux)
		if err != nil {
			for _, o := range out {
				o.Close()
			}
			return nil, fmt.Errorf("metrics: reporter %s (metrics.reporter.%s.port %v on %s): %w", r.Name, r.Name, portsText(r.Ports), r.Host, err)
		}
		log.Info().Str("reporter", r.Name).Str("address", s.Addr).Msg("Prometheus reporter listening")
		out = append(out, s)
	}
	return out, nil
}

// StartPprof serves net/http/pprof on 127.0.0.1 at the first free port
// of debug.pprof.port; nil when that is unset.
func StartPprof(c *conf.Configuration, log zerolog.Logger) (*Server, error) {
	spec := conf.DebugPprofPort.Get(c)
	if spec == "" {
		return nil, nil
	}
	ports, err := conf.ParsePortRanges(spec)
	if err != nil {
		return nil, fmt.Errorf("metrics: debug.pprof.port: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	s, err := serve("127.0.0.1", ports, mux)
	if err != nil {
		return nil, fmt.Errorf("metrics: debug.pprof.port %s: %w", spec, err)
	}
	log.Info().Str("address", s.Addr).Msg("pprof listening")
	return s, nil
}

func serve(host string, ports []int, h http.Handler) (*Server, error) {
	var lis net.Listener
	var last error
	for _, p := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err == nil {
			lis = l
			break
		}
		last = err
	}
	if lis == nil {
		return nil, fmt.Errorf("%w: %v", ErrNoFreePort, last)
	}
	s := &Server{Addr: lis.Addr().String(), done: make(chan struct{}),
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(lis)
	}()
	return s, nil
}

func portsText(ports []int) string {
	if len(ports) == 0 {
		return "none"
	}
	return fmt.Sprintf("%d-%d", ports[0], ports[len(ports)-1])
}

// logAdapter sends promhttp's errors to the process log.
type logAdapter struct{ log zerolog.Logger }

func (l logAdapter) Println(v ...any) { l.log.Warn().Msg(fmt.Sprint(v...)) }
