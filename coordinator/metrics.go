package coordinator

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// nodeMetrics are the coordinator's Prometheus metrics, one registry per node (a test process
// runs several nodes). Gauges are read from Raft and the committed state at scrape time; the
// counters count what only the node's code paths see.
type nodeMetrics struct {
	registry     *prometheus.Registry
	leasesSent   atomic.Uint64 // lease elements written to workers' streams
	notLeader    atomic.Uint64 // worker requests answered not_leader or no_leader
	expiriesSent atomic.Uint64 // Expire commands committed by this node as leader
	// committed counts the entries this node committed as leader, by command type (the type byte).
	committed [256]atomic.Uint64
	// refusals counts the clients refused, by reason (limits.go).
	refusals [numRefusals]atomic.Uint64
	// proofSeconds times the leader's proofs of leadership (leaderTerm.proveLeadership): from the
	// proposal of the barrier to its commit; proofsFailed counts those that did not commit.
	proofSeconds prometheus.Histogram
	proofsFailed atomic.Uint64
	// tokensMoved counts, per ring, the tokens this node's committed plans gave a member that did
	// not hold them (movedTokens): the work of a membership change, in either movement mode.
	tokensMovedMu sync.Mutex
	tokensMoved   map[lease.RingKey]float64
}

// countMoved adds tokens moved in ring k.
func (m *nodeMetrics) countMoved(k lease.RingKey, tokens float64) {
	if tokens == 0 {
		return
	}
	m.tokensMovedMu.Lock()
	defer m.tokensMovedMu.Unlock()
	if m.tokensMoved == nil {
		m.tokensMoved = map[lease.RingKey]float64{}
	}
	m.tokensMoved[k] += tokens
}

// refused counts a refusal of reason r.
func (m *nodeMetrics) refused(r refusal) { m.refusals[r].Add(1) }

// countCommitted counts an entry of type typ that this node committed as leader.
func (m *nodeMetrics) countCommitted(typ fsm.CommandType) { m.committed[typ].Add(1) }

func newNodeMetrics(n *Node) *nodeMetrics {
	m := &nodeMetrics{registry: prometheus.NewRegistry()}
	m.proofSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "retryring_coordinator_leadership_proof_seconds",
		Help: "How long the leader's proofs of leadership took (a Raft barrier committed by a quorum); the leader sends leases for LeaderLeaseTimeout from each proof's start.",
		// The default LeaderLeaseTimeout is 250 ms: a proof that takes a good part of it leaves
		// little time to send.
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
	})
	m.registry.MustRegister(nodeCollector{n: n, m: m}, m.proofSeconds)
	return m
}

var (
	descLeader     = prometheus.NewDesc("retryring_coordinator_is_leader", "1 while this node is the Raft leader.", nil, nil)
	descRaftState  = prometheus.NewDesc("retryring_coordinator_raft_state", "1 for the Raft state this node is in.", []string{"state"}, nil)
	descTerm       = prometheus.NewDesc("retryring_coordinator_raft_term", "The current Raft term.", nil, nil)
	descCommit     = prometheus.NewDesc("retryring_coordinator_raft_commit_index", "The Raft commit index this node knows.", nil, nil)
	descApplied    = prometheus.NewDesc("retryring_coordinator_raft_applied_index", "The last Raft index applied to this node's state.", nil, nil)
	descLeaderKnow = prometheus.NewDesc("retryring_coordinator_leader_known", "1 while this node knows a leader.", nil, nil)
	descConns      = prometheus.NewDesc("retryring_coordinator_worker_connections", "Worker connections open on this node.", nil, nil)
	ringLabels     = []string{"region", "cluster", "service"}
	descMembers    = prometheus.NewDesc("retryring_coordinator_ring_members", "Members of a ring by state (active, joining, departed).", append(ringLabels, "state"), nil)
	descGeneration = prometheus.NewDesc("retryring_coordinator_ring_generation", "A ring's generation: it grows with every membership change.", ringLabels, nil)
	descAssigned   = prometheus.NewDesc("retryring_coordinator_ring_assigned_ratio", "Share of a ring's tokens assigned to active members (1 once settled).", ringLabels, nil)
	descSent       = prometheus.NewDesc("retryring_coordinator_lease_elements_sent_total", "Lease elements sent to workers by this node as leader.", nil, nil)
	descNotLeader  = prometheus.NewDesc("retryring_coordinator_redirects_total", "Worker requests this node answered not_leader or no_leader (served by the leader only).", nil, nil)
	descExpiries   = prometheus.NewDesc("retryring_coordinator_expiries_total", "Expire commands this node committed as leader (holds of departed members that ran out).", nil, nil)
	descProofsFail = prometheus.NewDesc("retryring_coordinator_leadership_proofs_failed_total", "Proofs of leadership this node started as leader that did not commit: it sent nothing on them.", nil, nil)
	descRefusals   = prometheus.NewDesc("retryring_coordinator_refusals_total",
		"Clients this node refused, by reason: unauthorized, revoked, setup_rate, streams_per_ring, connections, setup_timeout, setup_too_large, no_setup, admin_unauthorized, internal_unauthorized.", []string{"reason"}, nil)
	descTokensMoved = prometheus.NewDesc("retryring_coordinator_ring_tokens_moved_total",
		"Tokens of a ring that this node's committed plans gave a member (one incarnation of a worker id) that did not hold them, a restarted worker getting its own ranges back included (2^64 is the whole ring): what membership changes cost in handovers and re-scans.", ringLabels, nil)
	descMaxRanges = prometheus.NewDesc("retryring_coordinator_ring_member_ranges_max",
		"The most ranges an active member of a ring holds (1 in the contiguous mode; at most max ranges in the minimal one).", ringLabels, nil)
	descCommitted = prometheus.NewDesc("retryring_coordinator_raft_commands_total",
		"Raft entries this node committed as leader, by command type (reconcile: one entry for a pass over a ring, carrying its joins, downs, expiries, releases and plan).", []string{"type"}, nil)
)

// nodeCollector reads the node's state at scrape time.
type nodeCollector struct {
	n *Node
	m *nodeMetrics
}

func (c nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLeader, descRaftState, descTerm, descCommit, descApplied, descLeaderKnow,
		descConns, descMembers, descGeneration, descAssigned, descSent, descNotLeader, descExpiries, descProofsFail, descCommitted, descRefusals,
		descTokensMoved, descMaxRanges} {
		ch <- d
	}
	for _, d := range backlogDescs {
		ch <- d
	}
}

func (c nodeCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.n
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	counter(descSent, c.m.leasesSent.Load())
	counter(descNotLeader, c.m.notLeader.Load())
	counter(descExpiries, c.m.expiriesSent.Load())
	counter(descProofsFail, c.m.proofsFailed.Load())
	for r := range numRefusals {
		ch <- prometheus.MustNewConstMetric(descRefusals, prometheus.CounterValue, float64(c.m.refusals[r].Load()), r.String())
	}
	for typ := range c.m.committed {
		if v := c.m.committed[typ].Load(); v > 0 {
			ch <- prometheus.MustNewConstMetric(descCommitted, prometheus.CounterValue, float64(v), fsm.CommandType(typ).String())
		}
	}
	c.m.tokensMovedMu.Lock()
	for k, v := range c.m.tokensMoved {
		ch <- prometheus.MustNewConstMetric(descTokensMoved, prometheus.CounterValue, v, k.Region, k.Cluster, k.Service)
	}
	c.m.tokensMovedMu.Unlock()
	gauge(descConns, float64(len(n.conns.snapshot())))
	if n.raft == nil {
		return
	}
	state := n.raft.State()
	gauge(descLeader, b2f(state == raft.Leader))
	for _, s := range []raft.RaftState{raft.Follower, raft.Candidate, raft.Leader, raft.Shutdown} {
		gauge(descRaftState, b2f(s == state), s.String())
	}
	gauge(descTerm, float64(n.raft.CurrentTerm()))
	gauge(descCommit, float64(n.raft.CommitIndex()))
	gauge(descApplied, float64(n.raft.AppliedIndex()))
	_, leader := n.raft.LeaderWithID()
	gauge(descLeaderKnow, b2f(leader != ""))
	for _, r := range n.View().Rings {
		count := map[string]int{admin.MemberActive: 0, admin.MemberJoining: 0, admin.MemberDeparted: 0}
		assigned, most := 0.0, 0
		for _, m := range r.Members {
			count[m.State]++
			if m.State == admin.MemberActive {
				assigned += admin.SharePercent(m.Ranges) / 100
				most = max(most, len(m.Ranges))
			}
		}
		gauge(descMaxRanges, float64(most), r.Region, r.Cluster, r.Service)
		for state, k := range count {
			gauge(descMembers, float64(k), r.Region, r.Cluster, r.Service, state)
		}
		gauge(descGeneration, float64(r.Generation), r.Region, r.Cluster, r.Service)
		gauge(descAssigned, assigned, r.Region, r.Cluster, r.Service)
		if r.Backlog != nil {
			collectBacklog(gauge, r)
		}
	}
}

// Backlog metrics come from the leader's reports (BacklogView); a follower has none and exports
// none. Labels are the ring's and, for rates, the outcome (KnownOutcomes and "other"): nothing
// per worker.
var (
	descBacklogAge = prometheus.NewDesc("retryring_coordinator_backlog_age_seconds",
		"Now minus the start of the oldest window a ring's fresh reports name (0: nothing pending); NaN while they do not cover the ring (see reports_unknown).", ringLabels, nil)
	descPendingRows = prometheus.NewDesc("retryring_coordinator_pending_rows",
		"Rows the fresh reports of a ring's workers left unfinished in readable windows.", ringLabels, nil)
	descExecRate = prometheus.NewDesc("retryring_coordinator_executions_per_second",
		"Executions per second of a ring's workers by outcome (done, transient, permanent, not_sent, other), from their last two reports.", append(ringLabels, "outcome"), nil)
	descOpenBreakers = prometheus.NewDesc("retryring_coordinator_open_breakers",
		"Circuit breakers of a ring's workers that are open or half open.", ringLabels, nil)
	descDeadLetterRate = prometheus.NewDesc("retryring_coordinator_dead_letters_per_hour",
		"Steps a ring's workers dead-lettered per hour, from their last two reports.", ringLabels, nil)
	descReportsUnknown = prometheus.NewDesc("retryring_coordinator_reports_unknown",
		"Members of a ring (not departed) whose report is older than three report periods, or missing.", ringLabels, nil)
	backlogDescs = []*prometheus.Desc{descBacklogAge, descPendingRows, descExecRate, descOpenBreakers, descDeadLetterRate, descReportsUnknown}
)

func collectBacklog(gauge func(*prometheus.Desc, float64, ...string), r admin.RingStateView) {
	b := r.Backlog
	age := math.NaN()
	if b.AgeMs != nil {
		age = float64(*b.AgeMs) / 1000
	}
	gauge(descBacklogAge, age, r.Region, r.Cluster, r.Service)
	gauge(descPendingRows, float64(b.PendingRows), r.Region, r.Cluster, r.Service)
	for outcome, v := range b.ExecutionsPerS {
		gauge(descExecRate, v, r.Region, r.Cluster, r.Service, outcome)
	}
	gauge(descOpenBreakers, float64(len(b.OpenBreakers)), r.Region, r.Cluster, r.Service)
	gauge(descDeadLetterRate, b.DeadLettersPerHour, r.Region, r.Cluster, r.Service)
	gauge(descReportsUnknown, float64(len(b.ReportsUnknown)), r.Region, r.Cluster, r.Service)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
