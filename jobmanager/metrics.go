package jobmanager

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/jobmanager/rest"
	"github.com/gofl/gofl/metrics"
)

// jobManagerCollector exports the JobManager scope (cluster counts) and
// the job scope of every job not globally terminal, as Flink's
// flink_jobmanager_* and flink_jobmanager_job_*{job_id,job_name}, read
// through the REST queries when scraped.
// A standby JobManager (high availability) reports only its Go runtime:
// dispatcher answers nil while it does not lead.
type jobManagerCollector struct{ dispatcher func() rest.Dispatcher }

func (c jobManagerCollector) Describe(chan<- *prometheus.Desc) {} // unchecked: names vary with what the JobMaster reports

func (c jobManagerCollector) Collect(ch chan<- prometheus.Metric) {
	d := c.dispatcher()
	if d == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if m, err := rest.JobManagerMetrics(ctx, d); err == nil {
		for name, v := range m {
			if strings.HasPrefix(name, "Status.") {
				continue // the registry's own Go runtime collector has them
			}
			ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(metrics.Name(metrics.JobManagerScope, name), "JobManager "+name+".", nil, nil),
				prometheus.GaugeValue, v)
		}
	}
	jobs, err := d.JobsOverview(ctx)
	if err != nil {
		return
	}
	for _, j := range jobs.Jobs {
		switch j.State {
		case "FINISHED", "CANCELED", "FAILED":
			continue
		}
		m, err := d.JobMetrics(ctx, j.ID)
		if err != nil {
			continue
		}
		for name, v := range m {
			// Gauges, as Flink reports them.
			ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(metrics.Name(metrics.JobManagerScope, "job", name), "Job "+name+".",
				[]string{"job_id", "job_name"}, nil), prometheus.GaugeValue, v, j.ID, j.Name)
		}
	}
}

// startMetrics starts the configured Prometheus reporters and the
// optional pprof endpoint; they stop when ctx ends. A reporter that
// cannot bind fails the JobManager.
func (j *JobManager) startMetrics(ctx context.Context, c *conf.Configuration, d func() rest.Dispatcher, log zerolog.Logger) {
	host := conf.JobManagerRPCAddress.Get(c)
	reg := metrics.NewRegistry(metrics.JobManagerScope, prometheus.Labels{"host": host}, jobManagerCollector{d})
	j.run(func() {
		servers, err := metrics.StartReporters(c, host, reg, log)
		if err != nil {
			j.fail(fmt.Errorf("jobmanager: %w", err))
			return
		}
		pp, err := metrics.StartPprof(c, log)
		if err != nil {
			j.fail(fmt.Errorf("jobmanager: %w", err))
		} else if pp != nil {
			servers = append(servers, pp)
		}
		<-ctx.Done()
		for _, s := range servers {
			s.Close()
		}
	})
}
