package recorder

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/retryring/retryring/clockcheck"
)

// Metrics exposes a Recorder's Stats to Prometheus: register it once per process,
// prometheus.MustRegister(recorder.NewMetrics(rec)). No per-instance label: a process is one
// instance, and the scrape target says which. With a *clockcheck.Monitor as Config.ClockCheck it
// also exports retryring_recorder_clock_offset_seconds and the rest of the clock's verdict.
type Metrics struct {
	rec                                          *Recorder
	failures, errors, statements, rows, refusals *prometheus.Desc
	clock                                        *clockcheck.Metrics // nil without a monitor
}

// NewMetrics returns the collector of rec's counters.
func NewMetrics(rec *Recorder) *Metrics {
	name := func(n string) string { return prometheus.BuildFQName("retryring", "recorder", n) }
	m := &Metrics{
		rec:        rec,
		failures:   prometheus.NewDesc(name("failures_total"), "Failures recorded into the retry directory.", nil, nil),
		errors:     prometheus.NewDesc(name("errors_total"), "Record calls that returned an error.", nil, nil),
		statements: prometheus.NewDesc(name("statements_total"), "Requests sent to Cassandra (pages and retries included).", nil, nil),
		rows:       prometheus.NewDesc(name("cached_directory_rows"), "Directory rows remembered as written.", nil, nil),
		refusals:   prometheus.NewDesc(name("clock_refusals_total"), "Record calls refused, nothing written, because the clock was untrusted.", nil, nil),
	}
	if mon, ok := rec.cfg.ClockCheck.(*clockcheck.Monitor); ok {
		m.clock = clockcheck.NewMetrics(mon, "recorder")
	}
	return m
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.failures
	ch <- m.errors
	ch <- m.statements
	ch <- m.rows
	ch <- m.refusals
	if m.clock != nil {
		m.clock.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	s := m.rec.Stats()
	ch <- prometheus.MustNewConstMetric(m.failures, prometheus.CounterValue, float64(s.Failures))
	ch <- prometheus.MustNewConstMetric(m.errors, prometheus.CounterValue, float64(s.Errors))
	ch <- prometheus.MustNewConstMetric(m.statements, prometheus.CounterValue, float64(s.Statements))
	ch <- prometheus.MustNewConstMetric(m.rows, prometheus.GaugeValue, float64(s.CachedRows))
	ch <- prometheus.MustNewConstMetric(m.refusals, prometheus.CounterValue, float64(s.ClockRefusals))
	if m.clock != nil {
		m.clock.Collect(ch)
	}
}
