package coordinator

import (
	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/coordinator/auth"

	"context"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rs/zerolog"

	"github.com/retryring/retryring/lease"
)

// Peer is one voter of the cluster: its node id and the Raft address the others dial.
type Peer struct {
	ID       string
	RaftAddr string
}

// Config configures a Node. The zero value of every field means its default; WithDefaults fills
// them and Validate checks the result.
type Config struct {
	// NodeID names this coordinator in Raft and in the replicated state. Default "c1".
	NodeID string
	// RaftAddr, RSocketAddr and HTTPAddr are the listen addresses. Defaults 127.0.0.1:7400,
	// 127.0.0.1:7878 and 127.0.0.1:7480.
	RaftAddr    string
	RSocketAddr string
	HTTPAddr    string
	// DataDir holds the Raft log (raft.db) and snapshots. Default data/<NodeID>.
	DataDir string
	// Peers lists every voter, this node included, identically on every node: the cluster
	// bootstraps from it when no Raft state exists yet. Empty means a single-node cluster.
	Peers []Peer

	// Timing is the lease timing (TTL, renewal period, drift, margin); see lease.Timing. Defaults
	// TTL 10s, renewal 2s, drift 0.001, margin 100ms. Every element carries TTL and renewal; the
	// leader commits the timing to the replicated state before it sends anything under it.
	Timing lease.Timing
	// SilenceTimeout: a worker connection from which nothing was read for this long is closed and
	// the worker is down. Clients send KEEPALIVE at least every 200 ms. Default 750ms.
	SilenceTimeout time.Duration
	// WriteTimeout bounds one write to a worker connection; a worker that does not read is
	// disconnected. Default 2s.
	WriteTimeout time.Duration
	// ReconnectGrace is how long a new leader waits at least, past its election and one
	// SilenceTimeout, for the members of the replicated state to reconnect before it commits them
	// down; it also waits until their last lease from an earlier leader may have ended (election
	// + LeaderLeaseTimeout + the longest committed holder bound), so that a failover alone changes
	// no assignment. Default 2s.
	ReconnectGrace time.Duration
	// ApplyTimeout bounds how long a Raft command may wait to be enqueued. Default 2s.
	ApplyTimeout time.Duration
	// PassInterval is the least time between the starts of two reconcile passes of the leader.
	// What arrives within it (joins, downs, releases) is planned and committed together, one
	// entry per ring, so a join storm costs a few entries per ring instead of one per worker; an
	// event on a quiet leader is handled at once. Default 100ms.
	PassInterval time.Duration

	// HeartbeatTimeout, ElectionTimeout and LeaderLeaseTimeout tune Raft for fast failover.
	// Defaults 500ms, 500ms, 250ms. LeaderLeaseTimeout also bounds how long the leader may still
	// send lease elements after proposing an entry that a quorum then stored (a proof of
	// leadership, term.go): every coordinator must run with the same value.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration

	// Join lists admin HTTP addresses of running coordinators: this node joins their cluster
	// (membership.go) and never bootstraps one of its own, even with an empty data directory.
	// Excludes Peers.
	Join []string
	// Replace (--replace), with Join: this node takes the place of the voter of its node id, at
	// whatever address it is, and even when this node starts from an empty data directory. The
	// leader refuses such a join otherwise (admin.ErrPeerConflict): only the operator knows that the
	// old node is gone for good.
	Replace bool
	// Recover rewrites the stored Raft configuration before starting, after a lost quorum: to
	// PeersFile in DataDir if present, else Peers, else this node alone (recover.go).
	Recover bool

	// NoSync skips fsync of the Raft log. Only for tests: a node that crashes may lose
	// acknowledged entries, which breaks the safety argument.
	NoSync bool
	// Logger is the parent logger. The node adds node_id, and each of its parts its own "component"
	// field, so a logger given here carries neither.
	Logger zerolog.Logger
	// Clock tells the time for every lease decision. Default lease.SystemClock.
	Clock lease.Clock
	// ReportPeriod is how often workers send ring.report (their own setting, lease.ReportPeriod
	// unless changed). The leader reads a report older than three periods as unknown and samples
	// every ring's backlog age once a period. Default lease.ReportPeriod.
	ReportPeriod time.Duration

	// RaftListener, RSocketListener and HTTPListener, when set, are used instead of listening on
	// the addresses (a test harness pre-binds 127.0.0.1:0 to avoid port races). The node closes
	// them.
	RaftListener    net.Listener
	RSocketListener net.Listener
	HTTPListener    net.Listener
	// RaftAdvertise is the Raft address the others dial (a fault proxy in front of this node,
	// say). Default: this node's address in Peers, else the bound address.
	RaftAdvertise string
	// RSocketAdvertise and HTTPAdvertise are the addresses this node registers in the replicated
	// state for workers and for the other coordinators. Default: the bound addresses, which are
	// not dialable when binding to all interfaces (":7878"): set them then.
	RSocketAdvertise string
	HTTPAdvertise    string
	// TLS configures TLS on the RSocket, admin HTTP and Raft listeners and between coordinators
	// (tls.go). The zero value is plain TCP everywhere.
	TLS auth.TLS

	// RaftDial, when set, dials the other voters (a test can cut this node's outbound Raft
	// traffic). Default: a plain TCP dial.
	RaftDial func(ctx context.Context, addr string) (net.Conn, error)

	// WorkerTokensFile (--worker-tokens) admits a worker only with a token valid for its ring;
	// AdminTokenFile (--admin-token-file) requires a bearer token on every mutating admin call;
	// ClusterSecretFile (--cluster-secret-file) admits only coordinators to /v1/internal/. Each is
	// re-read every second. Empty: that check is off. See auth.go and docs/operations.md.
	WorkerTokensFile  string
	AdminTokenFile    string
	ClusterSecretFile string
	// Profiling serves Go's runtime profiles under /debug/pprof/ on the admin port (--profiling),
	// to the holders of an admin token when --admin-token-file is set, reads included: a CPU
	// profile costs the node CPU and a heap or goroutine dump shows its internals. Default off.
	Profiling bool
	// MaxConnections closes accepted RSocket connections beyond it at once; MaxSetupsPerSecond
	// answers SETUPs beyond it busy (with a burst of one second's worth); MaxStreamsPerRing answers
	// ring.leases beyond it busy. Zero: no cap. See limits.go.
	MaxConnections     int
	MaxSetupsPerSecond float64
	MaxStreamsPerRing  int
	// SetupTimeout closes a connection whose SETUP was not admitted within it. Default 5s.
	SetupTimeout time.Duration

	// fsmVersion, when set, makes the node run and register an older FSM version than its
	// build's (fsm.NewAt): a node of an older release, for tests of a rolling upgrade.
	fsmVersion int
	// trustFreshState, in tests, lets the first leader of a new state commit its epoch floor
	// without settling (settle.go): the test's cluster runs on ports no earlier cluster used, so
	// no worker can hold a lease from before, and a test that needs its first lease within the
	// silence timeout, or runs a TTL of minutes, does not wait one out.
	trustFreshState bool
	// sinceContact, when set, replaces time.Since in a follower's check of its last contact with
	// the leader (leaderErr): a test moves it past the election timeout at once instead of waiting
	// for Raft, whose LastContact is on the process clock, to get there.
	sinceContact func(time.Time) time.Duration
	// leadership, when set, wraps what the node reads of its own leadership from Raft
	// (syncLeadership): a test changes the term between two polls without an election.
	leadership func(raftLeadership) raftLeadership
	// raftTransport, when set, wraps the Raft transport the node runs on: a test delays or drops
	// single RPCs and their responses, which RaftDial (whole connections) cannot.
	raftTransport func(*raft.NetworkTransport) raft.Transport
	// lookupHost, when set, resolves the host of this node's own --peers entry (checkSelfPeer)
	// instead of DNS: a test names its nodes by host names only its resolver knows.
	lookupHost func(ctx context.Context, host string) ([]string, error)
}

// Defaults of Config.
const (
	DefaultNodeID             = "c1"
	DefaultRaftAddr           = "127.0.0.1:7400"
	DefaultRSocketAddr        = "127.0.0.1:7878"
	DefaultHTTPAddr           = "127.0.0.1:7480"
	DefaultSilenceTimeout     = 750 * time.Millisecond
	DefaultWriteTimeout       = 2 * time.Second
	DefaultReconnectGrace     = 2 * time.Second
	DefaultApplyTimeout       = 2 * time.Second
	DefaultPassInterval       = 100 * time.Millisecond
	DefaultHeartbeatTimeout   = 500 * time.Millisecond
	DefaultElectionTimeout    = 500 * time.Millisecond
	DefaultLeaderLeaseTimeout = 250 * time.Millisecond
	DefaultSetupTimeout       = 5 * time.Second
)

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.NodeID == "" {
		c.NodeID = DefaultNodeID
	}
	if c.RaftAddr == "" && c.RaftListener == nil {
		c.RaftAddr = DefaultRaftAddr
	}
	if c.RSocketAddr == "" && c.RSocketListener == nil {
		c.RSocketAddr = DefaultRSocketAddr
	}
	if c.HTTPAddr == "" && c.HTTPListener == nil {
		c.HTTPAddr = DefaultHTTPAddr
	}
	if c.DataDir == "" {
		c.DataDir = filepath.Join("data", c.NodeID)
	}
	c.Timing = c.Timing.WithDefaults()
	if c.SilenceTimeout == 0 {
		c.SilenceTimeout = DefaultSilenceTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.ReconnectGrace == 0 {
		c.ReconnectGrace = DefaultReconnectGrace
	}
	if c.ApplyTimeout == 0 {
		c.ApplyTimeout = DefaultApplyTimeout
	}
	if c.PassInterval == 0 {
		c.PassInterval = DefaultPassInterval
	}
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = DefaultElectionTimeout
	}
	if c.LeaderLeaseTimeout == 0 {
		c.LeaderLeaseTimeout = DefaultLeaderLeaseTimeout
	}
	if c.Clock == nil {
		c.Clock = lease.SystemClock{}
	}
	if c.ReportPeriod == 0 {
		c.ReportPeriod = lease.ReportPeriod
	}
	if c.SetupTimeout == 0 {
		c.SetupTimeout = DefaultSetupTimeout
	}
	return c
}

// Validate checks the configuration after filling defaults.
func (c Config) Validate() error {
	c = c.WithDefaults()
	if err := c.Timing.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	if !admin.ValidNodeID(c.NodeID) {
		return fmt.Errorf("%w: node id %q", ErrBadConfig, c.NodeID)
	}
	switch {
	case len(c.Join) > 0 && len(c.Peers) > 0:
		return fmt.Errorf("%w: give --join (to join a running cluster) or --peers (to bootstrap one), not both", ErrBadConfig)
	case c.Replace && len(c.Join) == 0:
		return fmt.Errorf("%w: --replace goes with --join (it replaces the voter of this node's id as this node joins)", ErrBadConfig)
	case len(c.Join) > 0 && c.Recover:
		return fmt.Errorf("%w: --recover rebuilds a cluster from this node's state; it cannot also --join one", ErrBadConfig)
	}
	for _, a := range c.Join {
		if a == "" {
			return fmt.Errorf("%w: --join: an empty address", ErrBadConfig)
		}
	}
	if err := validatePeers(c.Peers, c.NodeID); err != nil {
		return err
	}
	if err := c.TLS.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	if (c.WorkerTokensFile != "" || c.AdminTokenFile != "") && c.ClusterSecretFile == "" && !c.TLS.CoordinatorIdentity() {
		// Tokens would be worth nothing while /v1/internal/ stays open: anyone could register a
		// coordinator address that followers redirect workers (and their tokens) to, or join Raft.
		return fmt.Errorf("%w: --worker-tokens and --admin-token-file need the internal endpoints closed too: give --cluster-secret-file, or Raft TLS (--raft-tls-*) with TLS on the admin port (--tls-cert)", ErrBadConfig)
	}
	for name, d := range map[string]time.Duration{
		"silence timeout": c.SilenceTimeout, "write timeout": c.WriteTimeout,
		"reconnect grace": c.ReconnectGrace, "apply timeout": c.ApplyTimeout,
		"report period": c.ReportPeriod, "pass interval": c.PassInterval, "setup timeout": c.SetupTimeout,
	} {
		if d < 0 {
			return fmt.Errorf("%w: negative %s %v", ErrBadConfig, name, d)
		}
	}
	if c.MaxConnections < 0 || c.MaxStreamsPerRing < 0 || !(c.MaxSetupsPerSecond >= 0) {
		return fmt.Errorf("%w: negative --max-connections, --max-setups-per-second or --max-streams-per-ring", ErrBadConfig)
	}
	switch {
	case c.HeartbeatTimeout < 5*time.Millisecond || c.ElectionTimeout < 5*time.Millisecond ||
		c.LeaderLeaseTimeout < 5*time.Millisecond:
		return fmt.Errorf("%w: raft timeouts must be at least 5ms", ErrBadConfig)
	case c.LeaderLeaseTimeout > c.HeartbeatTimeout:
		return fmt.Errorf("%w: leader lease timeout %v exceeds heartbeat timeout %v", ErrBadConfig, c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	case c.ElectionTimeout < c.HeartbeatTimeout:
		return fmt.Errorf("%w: election timeout %v is below heartbeat timeout %v", ErrBadConfig, c.ElectionTimeout, c.HeartbeatTimeout)
	case c.LeaderLeaseTimeout >= c.Timing.TTL:
		// A leader may send for LeaderLeaseTimeout after its last quorum contact; a lease
		// shorter than that would make a failover wait longer than the lease it protects.
		return fmt.Errorf("%w: leader lease timeout %v must be below the lease TTL %v", ErrBadConfig, c.LeaderLeaseTimeout, c.Timing.TTL)
	}
	return nil
}

// raftAdvertise is the address of this node in the Raft configuration.
func (c Config) raftAdvertise(bound string) string {
	if c.RaftAdvertise != "" {
		return c.RaftAdvertise
	}
	for _, p := range c.Peers {
		if p.ID == c.NodeID {
			return p.RaftAddr
		}
	}
	return bound
}
