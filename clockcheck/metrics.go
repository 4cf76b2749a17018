package clockcheck

import "github.com/prometheus/client_golang/prometheus"

// Metrics exposes a Monitor's verdict to Prometheus as retryring_<subsystem>_clock_offset_seconds
// (Cassandra − local; absent before the first measurement), _clock_uncertainty_seconds,
// _clock_estimate_age_seconds, _clock_limit_seconds (max_clock_offset / 2), _clock_trusted (1 or 0),
// _clock_host_spread_seconds (how far apart Cassandra's hosts' clocks may be) and
// _clock_measurement_failures_total.
type Metrics struct {
	m                                                        *Monitor
	offset, uncertainty, age, limit, trusted, failed, spread *prometheus.Desc
}

// NewMetrics returns the collector of m for the process kind subsystem ("worker", "recorder").
func NewMetrics(m *Monitor, subsystem string) *Metrics {
	name := func(n string) string { return prometheus.BuildFQName("retryring", subsystem, n) }
	return &Metrics{
		m:           m,
		offset:      prometheus.NewDesc(name("clock_offset_seconds"), "Measured offset of Cassandra's clock from this process's (positive: this clock is behind).", nil, nil),
		uncertainty: prometheus.NewDesc(name("clock_uncertainty_seconds"), "Uncertainty of the measured clock offset (half the least round trip).", nil, nil),
		age:         prometheus.NewDesc(name("clock_estimate_age_seconds"), "Age of the clock offset estimate.", nil, nil),
		limit:       prometheus.NewDesc(name("clock_limit_seconds"), "How far from Cassandra's clock this process may be: max_clock_offset / 2.", nil, nil),
		trusted:     prometheus.NewDesc(name("clock_trusted"), "1 while |offset| + uncertainty is within max_clock_offset / 2 and the estimate is fresh, else 0.", nil, nil),
		failed:      prometheus.NewDesc(name("clock_measurement_failures_total"), "Clock offset measurements that produced no estimate.", nil, nil),
		spread:      prometheus.NewDesc(name("clock_host_spread_seconds"), "How far apart the clocks of the Cassandra hosts measured may be (0 with one host); above clock_limit_seconds they disagree.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (x *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- x.offset
	ch <- x.uncertainty
	ch <- x.age
	ch <- x.limit
	ch <- x.trusted
	ch <- x.failed
	ch <- x.spread
}

// Collect implements prometheus.Collector.
func (x *Metrics) Collect(ch chan<- prometheus.Metric) {
	s := x.m.Status()
	trusted := 0.0
	if s.Trusted {
		trusted = 1
	}
	ch <- prometheus.MustNewConstMetric(x.limit, prometheus.GaugeValue, s.Limit.Seconds())
	ch <- prometheus.MustNewConstMetric(x.trusted, prometheus.GaugeValue, trusted)
	ch <- prometheus.MustNewConstMetric(x.failed, prometheus.CounterValue, float64(x.m.Failures()))
	if s.Measured {
		ch <- prometheus.MustNewConstMetric(x.offset, prometheus.GaugeValue, s.Estimate.Offset.Seconds())
		ch <- prometheus.MustNewConstMetric(x.uncertainty, prometheus.GaugeValue, s.Estimate.Uncertainty.Seconds())
		ch <- prometheus.MustNewConstMetric(x.age, prometheus.GaugeValue, s.Age.Seconds())
		ch <- prometheus.MustNewConstMetric(x.spread, prometheus.GaugeValue, s.Estimate.Spread.Seconds())
	}
}
