package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/retryring/retryring/internal/demo"
)

// demoOptions are the flags of `retryring demo`.
type demoOptions struct {
	cassandra         string
	keyspace          string
	keep              bool
	count             int
	instances         int
	workers           int
	workerConcurrency int
	duration503       time.Duration
	permanentFraction float64
	backdate          time.Duration
	noFaults          bool
	noReplay          bool
	timeout           time.Duration
	display           string
	logDir            string
}

func newDemoCommand() *cobra.Command { return demoCommand(&demoOptions{}) }

// demoCommand builds the command with its flags bound to o (the tests read o back).
func demoCommand(o *demoOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "The main job on one machine: a coordinator cluster, workers, a burst of failures, faults, and a summary",
		Long: `Run the whole system on this machine and watch it drain a burst of failures.

The demo checks Cassandra (and starts it with scripts/cassandra.sh when it is not running on
this machine), creates a fresh keyspace, starts 3 coordinators, 3 workers (this same binary) and
a stub downstream that answers 503 at first. It records a burst of failures as regular services
would (W+1), shows the drain live, kills -9 and restarts the busiest worker, kills -9 the
coordinator leader and restarts it, and ends with a summary: recorded, done, dead-lettered, lost,
executed twice, time to drain. It exits non-zero if anything was lost. Ctrl-C stops everything.`,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			return bindEnv(cmd, os.LookupEnv)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.config()
			if err != nil {
				return err
			}
			_, err = demo.Run(cmd.Context(), cfg, cmd.OutOrStdout())
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.cassandra, "cassandra", demo.DefaultCassandra, "Cassandra contact points, host:port,...")
	fs.StringVar(&o.keyspace, "keyspace", "", "keyspace to create for the run (default demo_<UTC date>_<time>); must not exist")
	fs.BoolVar(&o.keep, "keep", false, "keep the keyspace and the processes' logs at the end")
	fs.IntVar(&o.count, "count", demo.DefaultCount, "failures in the burst")
	fs.IntVar(&o.instances, "instances", demo.DefaultInstances, "regular-service instances recording the burst")
	fs.IntVar(&o.workers, "workers", demo.DefaultWorkers, "retry workers")
	fs.IntVar(&o.workerConcurrency, "worker-concurrency", demo.DefaultWorkerConcurrency, "each worker's --concurrency")
	fs.DurationVar(&o.duration503, "duration-503", demo.DefaultDuration503, "how long the downstream answers 503, counted from the first call it refuses (it refuses 10 at least); 0: never")
	fs.Float64Var(&o.permanentFraction, "permanent-fraction", demo.DefaultPermanentFraction, "fraction of transactions the downstream refuses with a permanent 4xx (dead-lettered)")
	fs.DurationVar(&o.backdate, "backdate", 0, "record into a past window (readable at once) instead of W+1; 0: W+1")
	fs.BoolVar(&o.noFaults, "no-faults", false, "do not kill a worker and the coordinator leader")
	fs.BoolVar(&o.noReplay, "no-replay", false, "do not replay the dead letters once the rest drained")
	fs.DurationVar(&o.timeout, "timeout", demo.DefaultTimeout, "bound on the drain; what is not finished by then counts as lost")
	fs.StringVar(&o.display, "display", "auto", "progress display: auto (redraw on a terminal, plain lines otherwise), tty, plain")
	fs.StringVar(&o.logDir, "log-dir", "", "directory for the processes' logs and Raft data (default: a temporary one, removed unless --keep or failure)")
	annotateEnv(cmd)
	return cmd
}

// config turns the flags into a demo.Config. Zero means "the default" in demo.Config, so the
// flags' explicit zeros become the config's "none".
func (o demoOptions) config() (demo.Config, error) {
	cfg := demo.Config{
		Cassandra: o.cassandra, Keyspace: o.keyspace, Keep: o.keep,
		Count: o.count, Instances: o.instances, Workers: o.workers, WorkerConcurrency: o.workerConcurrency,
		Duration503: o.duration503, PermanentFraction: o.permanentFraction, Backdate: o.backdate,
		NoFaults: o.noFaults, NoReplay: o.noReplay, Timeout: o.timeout, LogDir: o.logDir,
	}
	if o.duration503 == 0 {
		cfg.Duration503 = -1
	}
	if o.permanentFraction == 0 {
		cfg.PermanentFraction = -1
	}
	switch o.display {
	case "auto":
		cfg.Display = demo.DisplayAuto
	case "tty":
		cfg.Display = demo.DisplayTTY
	case "plain":
		cfg.Display = demo.DisplayPlain
	default:
		return cfg, fmt.Errorf("--display %q: want auto, tty or plain", o.display)
	}
	if o.count < 1 || o.instances < 1 || o.workers < 1 || o.workerConcurrency < 1 {
		return cfg, fmt.Errorf("--count, --instances, --workers and --worker-concurrency must be at least 1")
	}
	if o.duration503 < 0 || o.backdate < 0 || o.timeout <= 0 || o.permanentFraction < 0 {
		return cfg, fmt.Errorf("--duration-503, --backdate and --permanent-fraction must not be negative, --timeout must be positive")
	}
	return cfg, cfg.Validate()
}
