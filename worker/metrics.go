package worker

import "github.com/prometheus/client_golang/prometheus"

// Metrics exposes a Scanner's Stats to Prometheus: register it once per process,
// prometheus.MustRegister(worker.NewMetrics(sc)). Counters carry no per-worker label (a process
// is one worker; the scrape target says which).
type Metrics struct {
	sc       *Scanner
	counters []counterMetric
	gauges   []gaugeMetric
	breaker  *prometheus.Desc
}

type gaugeMetric struct {
	desc  *prometheus.Desc
	value func(*Scanner) float64
}

type counterMetric struct {
	desc  *prometheus.Desc
	value func(Stats) uint64
	label string // the value of the one label, if the desc has one
}

// NewMetrics returns the collector of sc's counters.
func NewMetrics(sc *Scanner) *Metrics {
	name := func(n string) string { return prometheus.BuildFQName("retryring", "worker", n) }
	executions := prometheus.NewDesc(name("executions_total"),
		"Executions of retried steps, by outcome (done, transient, permanent).", []string{"outcome"}, nil)
	rescanned := prometheus.NewDesc(name("instances_rescanned_total"),
		"Visits of tier-3 instances whose token this process had not covered in that window before: after its start (after=\"start\"), or after a handover gave it the token (after=\"handover\"); work another owner or an earlier launch may have begun.",
		[]string{"after"}, nil)
	simple := func(n, help string, v func(Stats) uint64) counterMetric {
		return counterMetric{desc: prometheus.NewDesc(name(n), help, nil, nil), value: v}
	}
	return &Metrics{
		sc: sc,
		counters: []counterMetric{
			{desc: executions, label: "done", value: func(s Stats) uint64 { return s.Done }},
			{desc: executions, label: "transient", value: func(s Stats) uint64 { return s.Transient }},
			{desc: executions, label: "permanent", value: func(s Stats) uint64 { return s.Permanent }},
			simple("cycles_total", "Traversal cycles run.", func(s Stats) uint64 { return s.Cycles }),
			simple("committed_total", "COMMITTED markers written after successful executions.", func(s Stats) uint64 { return s.Committed }),
			simple("rerecorded_total", "Transient failures recorded again into a later window.", func(s Stats) uint64 { return s.Rerecorded }),
			simple("dead_lettered_total", "Failures given up on (permanent, or out of attempts).", func(s Stats) uint64 { return s.DeadLettered }),
			simple("skipped_committed_total", "Rows not executed because their step was already COMMITTED.", func(s Stats) uint64 { return s.SkippedCommitted }),
			simple("skipped_superseded_total", "Rows finished without execution because a newer copy of their step exists (the marker's floor).", func(s Stats) uint64 { return s.SkippedSuperseded }),
			simple("skipped_dead_lettered_total", "Rows finished without execution because their step was DEAD_LETTERED before floors existed.", func(s Stats) uint64 { return s.SkippedDeadLettered }),
			simple("not_sent_total", "Executions that never reached the downstream (refused past their deadline): no attempt used.", func(s Stats) uint64 { return s.NotSent }),
			simple("carried_total", "Rows of buckets kept past marker retention − 1 day, recorded again unchanged into the next window.", func(s Stats) uint64 { return s.Carried }),
			simple("skipped_in_progress_total", "Rows left for later because another worker's IN_PROGRESS marker was alive.", func(s Stats) uint64 { return s.SkippedInProgress }),
			simple("skipped_busy_total", "Rows left for later because the same step was running from another bucket.", func(s Stats) uint64 { return s.SkippedBusy }),
			simple("instances_scanned_total", "Tier-3 instance markers visited (a pending instance once per cycle).", func(s Stats) uint64 { return s.InstancesScanned }),
			{desc: rescanned, label: "start", value: func(s Stats) uint64 { return s.InstancesRescannedStart }},
			{desc: rescanned, label: "handover", value: func(s Stats) uint64 { return s.InstancesRescannedHandover }},
			simple("buckets_deleted_total", "Bucket partitions deleted after every row finished.", func(s Stats) uint64 { return s.BucketsDeleted }),
			simple("buckets_kept_total", "Buckets kept because not every row finished.", func(s Stats) uint64 { return s.BucketsKept }),
			simple("instances_deleted_total", "Tier-3 instance markers deleted.", func(s Stats) uint64 { return s.InstancesDeleted }),
			simple("windows_deleted_total", "Tier-2 windows deleted by Node-0.", func(s Stats) uint64 { return s.WindowsDeleted }),
			simple("days_deleted_total", "Tier-1 days deleted by Node-0.", func(s Stats) uint64 { return s.DaysDeleted }),
			simple("outlived_deletes_total", "Windows and days still there right after Node-0's checked delete (stamped within max_clock_offset of it); a later pass deletes them.", func(s Stats) uint64 { return s.Outlived }),
			simple("guard_refusals_total", "Queries and executions the lease guard refused.", func(s Stats) uint64 { return s.GuardRefusals }),
			simple("held_paused_total", "Rows left for later because the operator paused the ring or their impl type.", func(s Stats) uint64 { return s.HeldPaused }),
			simple("pause_sweeps_total", "Traversals of a paused ring that only checked rows against their markers, to carry kept buckets before their markers expire.", func(s Stats) uint64 { return s.PauseSweeps }),
			simple("breaker_refused_total", "Executions an open circuit breaker did not start (calls saved to a failing downstream); the rows stay, attempts unused.", func(s Stats) uint64 { return s.BreakerRefused }),
			simple("errors_total", "Queries that failed and executors that panicked.", func(s Stats) uint64 { return s.Errors }),
		},
		gauges: []gaugeMetric{
			{prometheus.NewDesc(name("executions_in_flight"), "Executions under way.", nil, nil),
				func(sc *Scanner) float64 { return float64(len(sc.sem)) }},
			{prometheus.NewDesc(name("lease_fit"), "1 when the query and execution timeouts fit the least validity of the lease in force (ttl − 2 × renewal), 0 when not (see /readyz).", nil, nil),
				func(sc *Scanner) float64 { return bool01(sc.LeaseFit() == "") }},
			{prometheus.NewDesc(name("paused"), "1 while the operator has paused the ring: no execution, and no traversal but the hourly pause sweep of markers.", nil, nil),
				func(sc *Scanner) float64 { c := sc.controls(); return bool01(c != nil && c.Paused) }},
			{prometheus.NewDesc(name("execution_rate_limit"), "Executions per second this worker allows itself: its share of the ring's limit capped by --max-rate (+Inf: none).", nil, nil),
				func(sc *Scanner) float64 { sc.controls(); return sc.throttle.limit() }},
		},
		breaker: prometheus.NewDesc(name("breaker_state"),
			"Circuit breaker of each impl type: 0 closed, 1 half open (probing), 2 open. Impl types past 64 share impl=\""+overflowBreaker+"\".", []string{"impl"}, nil),
	}
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	seen := map[*prometheus.Desc]bool{}
	for _, c := range m.counters {
		if !seen[c.desc] {
			seen[c.desc] = true
			ch <- c.desc
		}
	}
	for _, g := range m.gauges {
		ch <- g.desc
	}
	ch <- m.breaker
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	s := m.sc.Stats()
	for _, c := range m.counters {
		var labels []string
		if c.label != "" {
			labels = []string{c.label}
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(c.value(s)), labels...)
	}
	for _, g := range m.gauges {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, g.value(m.sc))
	}
	for _, b := range m.sc.breakers.view(m.sc.now()) {
		ch <- prometheus.MustNewConstMetric(m.breaker, prometheus.GaugeValue, float64(b.state), b.impl)
	}
}
