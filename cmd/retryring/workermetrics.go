package main

import "github.com/prometheus/client_golang/prometheus"

// dependencyMetrics exposes a worker's dependencyStats to Prometheus: what it takes to open and
// keep its Cassandra session. The worker serves them from its start, before Cassandra is up.
type dependencyMetrics struct {
	stats                                   *dependencyStats
	attempts, failures, checks, lost, reach *prometheus.Desc
}

func newDependencyMetrics(s *dependencyStats) *dependencyMetrics {
	name := func(n string) string { return prometheus.BuildFQName("retryring", "worker", n) }
	return &dependencyMetrics{
		stats:    s,
		attempts: prometheus.NewDesc(name("cassandra_connect_attempts_total"), "Attempts to open the Cassandra session and find its schema current, at start (retried with backoff, 0.5 s to 30 s).", nil, nil),
		failures: prometheus.NewDesc(name("cassandra_connect_failures_total"), "Attempts to open the Cassandra session or find its schema current that failed (unreachable, login or TLS refused, schema missing or too old).", nil, nil),
		checks:   prometheus.NewDesc(name("cassandra_check_failures_total"), "Checks of the running worker's Cassandra session (one a second) that failed.", nil, nil),
		lost:     prometheus.NewDesc(name("cassandra_lost_total"), "Times the worker gave its ranges back because Cassandra was unreachable for longer than --cassandra-lost-after.", nil, nil),
		reach:    prometheus.NewDesc(name("cassandra_reachable"), "1 while the worker's Cassandra session is open with a current schema and its last check succeeded, else 0.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *dependencyMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.attempts
	ch <- m.failures
	ch <- m.checks
	ch <- m.lost
	ch <- m.reach
}

// Collect implements prometheus.Collector.
func (m *dependencyMetrics) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	counter(m.attempts, m.stats.connectAttempts.Load())
	counter(m.failures, m.stats.connectFailures.Load())
	counter(m.checks, m.stats.pingFailures.Load())
	counter(m.lost, m.stats.lost.Load())
	ch <- prometheus.MustNewConstMetric(m.reach, prometheus.GaugeValue, bool01(m.stats.reachable.Load()))
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
