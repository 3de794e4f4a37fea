package conf

import (
	"fmt"
	"strconv"
	"strings"
)

// PrometheusReporterFactory is the factory class of Flink's Prometheus
// reporter; gofl's reporter answers to it so a Flink config works as is.
const PrometheusReporterFactory = "org.apache.flink.metrics.prometheus.PrometheusReporterFactory"

// Metrics (metrics/), with Flink's reporter keys.
var (
	// MetricsReporters limits the reporters started to these names.
	MetricsReporters = StringOption("metrics.reporters", "",
		"Comma-separated names of the reporters to start; empty: every reporter configured with metrics.reporter.<name>.factory.class.")
	// MetricsReporterFactory selects a reporter's implementation.
	MetricsReporterFactory = EnumOption("metrics.reporter.<name>.factory.class", "", []string{PrometheusReporterFactory},
		"Implementation of reporter <name>: Prometheus (each process serves /metrics in Prometheus' text format, names and labels as Flink's PrometheusReporter).")
	// MetricsReporterPort is where a Prometheus reporter listens.
	MetricsReporterPort = StringOption("metrics.reporter.<name>.port", "9249",
		"Port, or ranges such as 9250-9260 (comma-separated), of a Prometheus reporter: each process takes the first free port.").
		WithCheck(func(s string) error { _, err := ParsePortRanges(s); return err })
	// MetricsReporterHost is the address a Prometheus reporter binds.
	MetricsReporterHost = StringOption("metrics.reporter.<name>.host", "",
		"Address a Prometheus reporter binds; empty: the address the process binds its RPC port to (loopback by default).")
	// DebugPprofPort opts in to Go's profiler endpoints.
	DebugPprofPort = StringOption("debug.pprof.port", "",
		"Port or ranges on which each process serves Go's net/http/pprof on 127.0.0.1; empty: off.").
		WithCheck(func(s string) error {
			if s == "" {
				return nil
			}
			_, err := ParsePortRanges(s)
			return err
		})
)

// ParsePortRanges reads Flink's port syntax: ports and ranges separated
// by commas ("9249", "9250-9260,9300"), in the order to try them.
func ParsePortRanges(s string) ([]int, error) {
	var ports []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(strings.TrimSpace(hi))
		}
		switch {
		case err != nil || part == "":
			return nil, fmt.Errorf("is not a port or a port range such as 9250-9260")
		case a < 0 || b > 65535 || a > b:
			return nil, fmt.Errorf("is not a port range within 0-65535 in ascending order")
		case b-a >= 10000:
			return nil, fmt.Errorf("spans more than 10000 ports")
		}
		for p := a; p <= b; p++ {
			ports = append(ports, p)
		}
	}
	return ports, nil
}
