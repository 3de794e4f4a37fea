package conf

import (
	"slices"
	"strings"
	"testing"
)

// A Flink reporter configuration loads as is: keys with a user-chosen
// name are known, validated and read per name.
func TestReporterPatternKeys(t *testing.T) {
	c, err := FromMap(map[string]string{
		"metrics.reporter.prom.factory.class": PrometheusReporterFactory,
		"metrics.reporter.prom.port":          "9250-9252,9300",
		"metrics.reporter.other.port":         "9400",
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := Names(c, MetricsReporterFactory); !slices.Equal(got, []string{"prom"}) {
		t.Fatalf("names %v", got)
	}
	if got := MetricsReporterFactory.For("prom").Get(c); got != PrometheusReporterFactory {
		t.Fatalf("factory %q", got)
	}
	ports, err := ParsePortRanges(MetricsReporterPort.For("prom").Get(c))
	if err != nil || !slices.Equal(ports, []int{9250, 9251, 9252, 9300}) {
		t.Fatalf("ports %v, %v", ports, err)
	}
	if got := MetricsReporterPort.For("none").Get(c); got != "9249" {
		t.Fatalf("default port %q", got)
	}
	for key, value := range map[string]string{
		"metrics.reporter.prom.factory.class": "org.apache.flink.metrics.jmx.JMXReporterFactory",
		"metrics.reporter.prom.port":          "9260-9250",
		"metrics.reporter.a.b.port":           "9249",
	} {
		_, err := FromMap(map[string]string{key: value})
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s=%s: want an error naming the key, got %v", key, value, err)
		}
	}
}
