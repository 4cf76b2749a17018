package demo

import (
	"fmt"
	"os"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/window"
)

// Defaults of Config. A zero field in a Config means its default.
const (
	DefaultCassandra    = cassandra.DefaultHost
	DefaultCount        = 20_000
	DefaultInstances    = 10
	DefaultWorkers      = 3
	DefaultCoordinators = 3
	// DefaultWorkerConcurrency is each worker's --concurrency: enough to keep a 2-core machine
	// busy, small enough that a kill -9 leaves few executions in flight.
	DefaultWorkerConcurrency = 32
	// DefaultDuration503 is how long the downstream answers 503, counted from the first call it
	// refuses (and it refuses outageRefusals at least): long enough that a part of the burst is
	// recorded again one window later, short enough that those copies succeed on their first
	// retry.
	DefaultDuration503 = 8 * time.Second
	// DefaultPermanentFraction of transactions are refused with a permanent 4xx, so that the
	// demo shows dead letters.
	DefaultPermanentFraction = 0.005
	DefaultLatency           = 2 * time.Millisecond
	DefaultJitter            = 8 * time.Millisecond
	// DefaultTimeout bounds the drain; whatever is not done or dead-lettered by then is lost.
	DefaultTimeout = 8 * time.Minute
	// DefaultRefresh is the period of the live progress.
	DefaultRefresh = time.Second
	// DefaultRecordConcurrency is the number of concurrent writes of the burst.
	DefaultRecordConcurrency = 32
	// DefaultMaxClockOffset is the workers' default: a window opens this long after its start.
	DefaultMaxClockOffset = 2 * time.Second
	// DefaultStopWait bounds the graceful stop of each process before it is killed.
	DefaultStopWait = 15 * time.Second
)

// DefaultRing is the ring of the demo.
var DefaultRing = lease.RingKey{Region: "local", Cluster: "demo", Service: "orders"}

// Schedule places the faults, counted from the moment the first window opens (the drain start).
// Each is the earliest time: a fault then waits for what it is meant to interrupt.
type Schedule struct {
	// WorkerKill is when a worker is killed with SIGKILL, at the next call it sends the downstream
	// from then on (so it has an execution under way); WorkerRestart how long after that it is
	// launched again (a new incarnation).
	WorkerKill    time.Duration
	WorkerRestart time.Duration
	// LeaderKill is when the coordinator leader is killed with SIGKILL, once the killed worker is
	// back and the ring settled again; LeaderRestart how long after that it is launched again (it
	// rejoins as a follower).
	LeaderKill    time.Duration
	LeaderRestart time.Duration
	// Pause is when the ring is paused with `retryring ctl pause` (once the downstream recovered
	// and no kill is under way, at the next call that reaches it), for PauseFor, then resumed
	// with `ctl resume`; a zero PauseFor pauses nothing.
	Pause, PauseFor time.Duration
}

// DefaultSchedule kills a worker while the first window drains and the leader a little later.
var DefaultSchedule = Schedule{
	WorkerKill: 4 * time.Second, WorkerRestart: 3 * time.Second,
	LeaderKill: 14 * time.Second, LeaderRestart: 10 * time.Second,
	Pause: 20 * time.Second, PauseFor: 8 * time.Second,
}

// Display chooses how progress is shown.
type Display int

// Displays.
const (
	// DisplayAuto redraws a block in place when the output is a terminal, and prints plain
	// lines otherwise.
	DisplayAuto Display = iota
	// DisplayTTY always redraws in place (ANSI escapes).
	DisplayTTY
	// DisplayPlain prints one status line per refresh and every event on a line of its own.
	DisplayPlain
)

// Config configures a demo run. Zero values mean the defaults.
type Config struct {
	// Binary is the retryring binary the coordinators and workers run. Default: this process's
	// executable (the demo is a subcommand of the same binary).
	Binary string
	// Cassandra lists contact points, host:port,... Default DefaultCassandra.
	Cassandra string
	// Keyspace is created for the run and dropped at its end unless Keep. Default
	// demo_<UTC date>_<time>.
	Keyspace string
	// Keep keeps the keyspace and the processes' log directory.
	Keep bool
	// NoReplay skips the last act: the dead letters are not replayed once the rest drained.
	NoReplay bool
	// CassandraScript is scripts/cassandra.sh, run with "start" when Cassandra does not answer
	// on a loopback address. Default: looked up from the working directory and the binary's.
	CassandraScript string

	Ring          lease.RingKey
	WindowMinutes int
	// Count failures are recorded across Instances regular-service instances.
	Count     int
	Instances int
	// RecordConcurrency is the number of concurrent writes of the burst.
	RecordConcurrency int
	// Backdate, when positive, records into the window after the one the clock showed that long
	// ago (the late protocol; readable at once) instead of W+1 (readable within a window).
	Backdate time.Duration

	Workers           int
	Coordinators      int
	WorkerConcurrency int
	// MaxClockOffset must equal the workers' --max-clock-offset (their default).
	MaxClockOffset time.Duration
	// CoordinatorArgs and WorkerArgs are appended to every coordinator's and worker's flags
	// ("--log-level", "debug").
	CoordinatorArgs []string
	WorkerArgs      []string

	// Duration503 is how long the downstream answers 503, counted from the first call it refuses;
	// it refuses outageRefusals calls at least (fewer only for a smaller burst), however long the
	// workers take to come. Negative: never (zero means the default).
	Duration503 time.Duration
	// PermanentFraction of the transactions are refused for good (a 422), by a hash of their
	// id. Negative: none (zero means the default).
	PermanentFraction float64
	// Latency and Jitter are the downstream's time per call: Latency plus up to Jitter.
	Latency, Jitter time.Duration

	// NoFaults skips the kills.
	NoFaults bool
	Schedule Schedule

	Timeout  time.Duration
	Refresh  time.Duration
	StopWait time.Duration
	Display  Display
	// LogDir holds the processes' logs and the coordinators' data. Default: a new temporary
	// directory, removed at the end unless Keep or the run failed.
	LogDir string

	// Now tells the time. Default time.Now.
	Now func() time.Time
}

// withDefaults fills every zero field.
func (c Config) withDefaults() Config {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Binary == "" {
		if exe, err := os.Executable(); err == nil {
			c.Binary = exe
		}
	}
	if c.Cassandra == "" {
		c.Cassandra = DefaultCassandra
	}
	if c.Keyspace == "" {
		c.Keyspace = "demo_" + c.Now().UTC().Format("20060102_150405")
	}
	if c.Ring == (lease.RingKey{}) {
		c.Ring = DefaultRing
	}
	if c.WindowMinutes == 0 {
		c.WindowMinutes = 1
	}
	if c.Count == 0 {
		c.Count = DefaultCount
	}
	if c.Instances == 0 {
		c.Instances = DefaultInstances
	}
	if c.RecordConcurrency == 0 {
		c.RecordConcurrency = DefaultRecordConcurrency
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.Coordinators == 0 {
		c.Coordinators = DefaultCoordinators
	}
	if c.WorkerConcurrency == 0 {
		c.WorkerConcurrency = DefaultWorkerConcurrency
	}
	if c.MaxClockOffset == 0 {
		c.MaxClockOffset = DefaultMaxClockOffset
	}
	switch {
	case c.Duration503 == 0:
		c.Duration503 = DefaultDuration503
	case c.Duration503 < 0:
		c.Duration503 = 0
	}
	if c.PermanentFraction == 0 {
		c.PermanentFraction = DefaultPermanentFraction
	}
	if c.PermanentFraction < 0 { // negative asks for none
		c.PermanentFraction = 0
	}
	if c.Latency == 0 {
		c.Latency = DefaultLatency
	}
	if c.Jitter == 0 {
		c.Jitter = DefaultJitter
	}
	if c.Schedule == (Schedule{}) {
		c.Schedule = DefaultSchedule
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Refresh == 0 {
		c.Refresh = DefaultRefresh
	}
	if c.StopWait == 0 {
		c.StopWait = DefaultStopWait
	}
	return c
}

// Validate reports the first problem of c (after defaults), wrapped in ErrInvalidConfig.
func (c Config) Validate() error {
	c = c.withDefaults()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	if err := cassandra.ValidateKeyspace(c.Keyspace); err != nil {
		return bad("keyspace: %v", err)
	}
	if err := c.Ring.Validate(); err != nil {
		return bad("ring: %v", err)
	}
	if err := window.ValidateLength(c.WindowMinutes); err != nil {
		return bad("%v", err)
	}
	s := c.Schedule
	switch {
	case c.Binary == "":
		return bad("no binary: os.Executable failed and none was given")
	case c.Count < 1 || c.Instances < 1 || c.RecordConcurrency < 1:
		return bad("count %d, instances %d and record concurrency %d must be at least 1", c.Count, c.Instances, c.RecordConcurrency)
	case c.Workers < 1 || c.Coordinators < 1 || c.WorkerConcurrency < 1:
		return bad("workers %d, coordinators %d and worker concurrency %d must be at least 1", c.Workers, c.Coordinators, c.WorkerConcurrency)
	case !c.NoFaults && c.Workers < 2:
		// A kill -9 of the only worker leaves nobody to take its ranges while it is down.
		return bad("the faults need at least 2 workers (or no faults)")
	case !c.NoFaults && c.Coordinators < 3:
		// Killing the leader of fewer than three voters loses the quorum.
		return bad("killing the leader needs at least 3 coordinators (or no faults)")
	case c.PermanentFraction > 1:
		return bad("permanent fraction %v above 1", c.PermanentFraction)
	case c.Backdate < 0 || c.Latency < 0 || c.Jitter < 0 || c.MaxClockOffset < 0:
		return bad("negative duration")
	case s.WorkerKill < 0 || s.WorkerRestart < 0 || s.LeaderKill < 0 || s.LeaderRestart < 0 || s.Pause < 0 || s.PauseFor < 0:
		return bad("negative fault schedule")
	case c.Timeout < 0 || c.Refresh < 0 || c.StopWait < 0:
		return bad("negative timeout, refresh or stop wait")
	}
	return nil
}
