package main

import (
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/retryring/retryring/coordinator"
	"github.com/retryring/retryring/internal/flaglist"
	"github.com/retryring/retryring/lease"
)

func newCoordinatorCommand() *cobra.Command {
	var cfg coordinator.Config
	var peers, join string
	var lf logFlags
	var noSync bool
	var tf coordinatorTLSFlags
	cmd := &cobra.Command{
		Use:   "coordinator",
		Short: "Run one coordinator node (a Raft voter serving leases to workers over RSocket)",
		Long: `Run one coordinator node. Give every node the same --peers list; the cluster bootstraps
from it the first time; afterwards the data dir's configuration wins, and a --peers that differs
from it is logged at warn (change membership with ctl add-peer and remove-peer). A node added to a running cluster gets --join
instead (admin addresses of running coordinators): it never bootstraps a cluster of its own.
After a lost quorum, --recover rewrites the stored configuration (docs/operations.md). On SIGTERM
or SIGINT a leader hands its leadership to another voter before it stops.`,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			return bindEnv(cmd, os.LookupEnv)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := lf.logger(stderr)
			if err != nil {
				return err
			}
			if cfg.Peers, err = coordinator.ParsePeers(peers); err != nil {
				return err
			}
			cfg.Join = flaglist.Split(join)
			cfg.Logger = log
			routeRSocketLogs(log)
			cfg.NoSync = noSync
			cfg.TLS = tf.config()
			node, err := coordinator.New(cfg)
			if err != nil {
				return err
			}
			if err := node.Start(cmd.Context()); err != nil {
				return err
			}
			select {
			case <-cmd.Context().Done():
			case err := <-node.Failed():
				// Refused by the cluster (a join whose id is a voter already): an operator has
				// to decide, so exit with the reason rather than retry.
				_ = node.Close()
				return err
			}
			log.Info().Msg("stopping: handing over leadership if leader")
			return node.Close()
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.NodeID, "node-id", coordinator.DefaultNodeID, "this node's id in Raft and in the ring view")
	fs.StringVar(&cfg.RaftAddr, "raft-addr", "127.0.0.1:7400", "Raft listen address")
	fs.StringVar(&cfg.RSocketAddr, "rsocket-addr", "127.0.0.1:7878", "RSocket listen address for workers")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", "127.0.0.1:7480", "admin HTTP listen address (/ ring page, /v1/ring, /healthz, /readyz, /metrics)")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "Raft log and snapshots (default data/<node-id>)")
	fs.StringVar(&peers, "peers", "", "every voter as id=host:port,... (commas; the same on every node; this node's entry is its --raft-advertise, else its --raft-addr); empty: a single-node cluster")
	fs.StringVar(&join, "join", "", "admin HTTP addresses of running coordinators (host:port,...): join their cluster as a voter; never bootstraps one (instead of --peers)")
	fs.BoolVar(&cfg.Replace, "replace", false, "with --join: take the place of the voter of this --node-id, at whatever address, even from an empty data dir (the old node must be gone for good; without it such a join is refused)")
	fs.BoolVar(&cfg.Recover, "recover", false, "after a lost quorum: rewrite the stored Raft configuration to DATA_DIR/peers.json, else --peers, else this node alone, then start (docs/operations.md)")
	fs.StringVar(&cfg.RaftAdvertise, "raft-advertise", "", "Raft address the other coordinators dial (default: this node's entry in --peers, else the bound address): a node started with --join on a --raft-addr of every interface (:7400) needs it")
	fs.StringVar(&cfg.RSocketAdvertise, "rsocket-advertise", "", "RSocket address workers are redirected to (default: the bound address)")
	fs.StringVar(&cfg.HTTPAdvertise, "http-advertise", "", "admin HTTP address other coordinators reach (default: the bound address)")
	fs.DurationVar(&cfg.Timing.TTL, "lease-ttl", lease.DefaultTTL, "lease TTL, counted by the worker from its demand")
	fs.DurationVar(&cfg.Timing.Renewal, "lease-renewal", lease.DefaultRenewal, "how often leases are renewed")
	fs.Float64Var(&cfg.Timing.Drift, "lease-drift", lease.DefaultDrift, "bound on the relative clock rate error (ρ)")
	fs.DurationVar(&cfg.Timing.Margin, "lease-margin", lease.DefaultMargin, "margin added to every coordinator-side lease expiry")
	fs.DurationVar(&cfg.SilenceTimeout, "silence-timeout", coordinator.DefaultSilenceTimeout, "a worker silent this long is down (keep it above two KEEPALIVE periods: docs/protocol.md section 3)")
	fs.DurationVar(&cfg.HeartbeatTimeout, "raft-heartbeat-timeout", 500*time.Millisecond, "Raft heartbeat timeout")
	fs.DurationVar(&cfg.ElectionTimeout, "raft-election-timeout", 500*time.Millisecond, "Raft election timeout")
	fs.DurationVar(&cfg.LeaderLeaseTimeout, "raft-leader-lease-timeout", 250*time.Millisecond, "Raft leader lease timeout; also how long after a committed barrier (its proof of leadership) the leader may send leases")
	fs.StringVar(&cfg.WorkerTokensFile, "worker-tokens", "", "YAML file of worker token hashes per ring (retryring token new); re-read on change. Empty: workers need no token")
	fs.StringVar(&cfg.AdminTokenFile, "admin-token-file", "", "YAML file of admin token hashes: every mutating admin call needs Authorization: Bearer. Empty: none needed")
	fs.BoolVar(&cfg.Profiling, "profiling", false, "serve Go's runtime profiles under /debug/pprof/ on the admin port (with --admin-token-file, to admin tokens only, GETs included)")
	fs.StringVar(&cfg.ClusterSecretFile, "cluster-secret-file", "", "file of the secret every coordinator sends on /v1/internal/ calls (the same on all). Empty: those are open unless Raft TLS is on")
	fs.IntVar(&cfg.MaxConnections, "max-connections", 0, "RSocket connections at most; more are closed at once (0: no cap)")
	fs.Float64Var(&cfg.MaxSetupsPerSecond, "max-setups-per-second", 0, "admitted SETUPs per second at most, with a burst of one second's worth; more are answered busy (0: no cap)")
	fs.IntVar(&cfg.MaxStreamsPerRing, "max-streams-per-ring", 0, "lease streams per ring at most on this node; more are answered busy (0: no cap)")
	fs.BoolVar(&noSync, "unsafe-no-sync", false, "skip fsync of the Raft log (tests only: a crash may lose acknowledged entries)")
	tf.register(fs)
	lf.register(fs)
	annotateEnv(cmd)
	return cmd
}
