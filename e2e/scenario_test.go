package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/internal/downstream"
	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/cassandratest"
	"github.com/retryring/retryring/testkit/proctest"
)

// Lease timing of the binaries' defaults, which the scenarios use: the bounds the checks derive
// from them are what the safety argument promises.
var timing = lease.Timing{}.WithDefaults()

// Defaults of the short scenarios.
const (
	shortWorkers     = 3
	shortConcurrency = 4
	shortInstances   = 3
	// backdate puts imported failures into a window that is readable at once and whose time has
	// passed, so that Node-0 may delete it as soon as it is empty.
	backdate = 5 * time.Minute
	// drainWait bounds the wait for a drain in a short scenario: long enough for a worker's
	// IN_PROGRESS marker to expire after a crash, and for a transient failure to come round again.
	drainWait = 4 * time.Minute
)

// shortOptions are the cluster options of a short scenario: three workers of modest concurrency
// and a downstream with a little latency, so that a drain lasts long enough to hit it with faults.
func shortOptions() proc.Options {
	return proc.Options{
		Workers:     shortWorkers,
		Concurrency: shortConcurrency,
		Downstream:  downstream.Config{Latency: 20 * time.Millisecond, Jitter: 20 * time.Millisecond},
	}
}

// scenario is one cluster, keyspace and stub, plus what was recorded and which faults happened.
type scenario struct {
	t       *testing.T
	ks      string
	c       *proc.Cluster
	ds      *downstream.Server
	session *gocql.Session
	batches []proc.Batch
	// uncertain are record runs that failed: which of their failures were recorded is unknown,
	// so their ids are neither expected nor counted lost.
	uncertain []proc.Batch
	faults    []fault
	quiet     []quietCheck
	// dbConfig, when set, adjusts the checks' session (a region's datacenter and consistency).
	dbConfig func(*gocql.ClusterConfig)
}

// newScenario starts a cluster for t in a keyspace of its own, with a service name chosen so that
// the record tool's instances spread evenly over the ring's equal shares (see spreadService). The
// cluster runs the binary of this run unless o names another.
func newScenario(t *testing.T, o proc.Options) *scenario {
	t.Helper()
	requireBinary(t, "coordinator", "worker", "record", "schema")
	ks := keyspaceName(t.Name())
	// Registered before the cluster's own cleanup, so it runs after every process is gone.
	t.Cleanup(func() { dropKeyspace(t, ks) })
	if o.Binary == "" {
		o.Binary = binary
	}
	o.Keyspace = ks
	o.Cassandra = cassandratest.Addr()
	if o.LogLevel == "" {
		o.LogLevel = os.Getenv("E2E_LOG_LEVEL") // debug, to read the workers' guard decisions
	}
	if o.Ring == (lease.RingKey{}) {
		workers := max(o.Workers, 1)
		o.Ring = lease.RingKey{Region: "e2e", Cluster: "c1", Service: spreadService(shortName(t.Name()), shortInstances, workers)}
	}
	s := &scenario{t: t, ks: ks}
	s.c = proctest.NewCluster(t, o)
	s.ds = s.c.Downstream
	t.Cleanup(func() {
		if s.session != nil {
			s.session.Close()
		}
	})
	return s
}

// shortName is the last element of a test name, lower case, for service names.
func shortName(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	out := b.String()
	if len(out) > 20 {
		out = out[:20]
	}
	return out
}

func keyspaceName(testName string) string {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	return "e2e_" + shortName(testName) + "_" + hex.EncodeToString(rnd[:])
}

// spreadService returns base, or base with a numeric suffix, such that the instance ids the
// record tool uses (<service>-pod-<i>, i < instances) fall into different equal shares of a ring
// of parts workers, as evenly as the numbers allow. Then every worker has work, whichever share
// it gets, and a fault hits a worker that is busy.
func spreadService(base string, instances, parts int) string {
	splits := lease.Split(parts)
	perPart := (instances + parts - 1) / parts
	for n := 0; n < 10000; n++ {
		svc := base
		if n > 0 {
			svc = base + strconv.Itoa(n)
		}
		count := make([]int, parts)
		ok := true
		for i := range instances {
			tok := cassandra.Token(fmt.Sprintf("%s-pod-%d", svc, i))
			for p, r := range splits {
				if r.Contains(tok) {
					count[p]++
					ok = ok && count[p] <= perPart
				}
			}
		}
		if ok {
			return svc
		}
	}
	return base
}

// ctx returns a context bounded by d and cancelled when the test ends.
func (s *scenario) ctx(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	s.t.Cleanup(cancel)
	return ctx
}

// db is a session on the scenario's keyspace, opened on first use.
func (s *scenario) db() *gocql.Session {
	s.t.Helper()
	if s.session == nil {
		cfg := cassandratest.Cluster()
		cfg.Keyspace = s.ks
		cfg.ReconnectionPolicy = &gocql.ConstantReconnectionPolicy{MaxRetries: 60, Interval: time.Second}
		if s.dbConfig != nil {
			s.dbConfig(cfg)
		}
		sess, err := cfg.CreateSession()
		if err != nil {
			s.t.Fatalf("session on %s: %v", s.ks, err)
		}
		s.session = sess
	}
	return s.session
}

// reconnect drops the session (after Cassandra restarted) so that the next db() opens a new one.
func (s *scenario) reconnect() {
	if s.session != nil {
		s.session.Close()
		s.session = nil
	}
}

// dropKeyspace drops ks with a fresh session, so that it works after Cassandra was restarted.
// A failed test with E2E_KEEP_LOGS set keeps it, to read the directory it left.
func dropKeyspace(t *testing.T, ks string) {
	if keep := os.Getenv(proctest.KeepLogsEnv); t.Failed() && keep != "" && keep != "0" {
		t.Logf("keyspace %s kept (%s)", ks, proctest.KeepLogsEnv)
		return
	}
	cfg := cassandratest.Cluster()
	cfg.ReconnectionPolicy = &gocql.ConstantReconnectionPolicy{MaxRetries: 30, Interval: time.Second}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var sess *gocql.Session
		if sess, err = cfg.CreateSession(); err == nil {
			err = sess.Query("DROP KEYSPACE IF EXISTS " + ks).Exec()
			sess.Close()
			if err == nil {
				return
			}
		}
		time.Sleep(2 * time.Second)
	}
	t.Errorf("drop keyspace %s: %v", ks, err)
}

// record runs `retryring record` and remembers the batch.
func (s *scenario) record(o proc.RecordOptions) proc.Batch {
	s.t.Helper()
	if o.Instances == 0 {
		o.Instances = shortInstances
	}
	b, err := s.c.Record(s.ctx(5*time.Minute), o)
	if err != nil {
		s.t.Fatalf("record: %v\n%s", err, b.Output)
	}
	s.t.Logf("record: %s", b.Output)
	s.batches = append(s.batches, b)
	return b
}

// recordBackdated imports n failures into a past window, one instance per 1,000 (the record
// tool's import batch), so n = 1000 × shortInstances gives each instance the same load.
func (s *scenario) recordBackdated(n int) proc.Batch {
	return s.record(proc.RecordOptions{Count: n, Backdate: backdate})
}

// expected is every transaction id recorded.
func (s *scenario) expected() []string {
	var out []string
	for _, b := range s.batches {
		out = append(out, b.IDs()...)
	}
	return out
}

// waitExecutions waits until the stub saw at least n executions.
func (s *scenario) waitExecutions(n int) {
	s.t.Helper()
	err := s.ds.WaitExecutions(s.ctx(2*time.Minute), func(es []downstream.Execution) bool { return len(es) >= n })
	if err != nil {
		s.t.Fatalf("waiting for %d executions (have %d): %v", n, len(s.ds.Executions()), err)
	}
}

// busyWorker waits until the stub saw n executions, then until some running worker is executing
// (at most a minute and a half: real-time windows open once a minute), and returns the running
// worker that started the most executions in the last second: the one a fault hurts most.
func (s *scenario) busyWorker(n int) *proc.Worker {
	s.t.Helper()
	s.waitExecutions(n)
	deadline := time.Now().Add(90 * time.Second)
	for {
		count := map[string]int{}
		for _, e := range s.ds.ExecutionsSince(time.Now().Add(-time.Second)) {
			count[e.WorkerID]++
		}
		var best *proc.Worker
		for _, w := range s.c.Workers() {
			if w.Running() && !w.Stopped() && (best == nil || count[w.ID] > count[best.ID]) {
				best = w
			}
		}
		if best == nil {
			s.t.Fatal("no running worker")
		}
		if count[best.ID] > 0 || time.Now().After(deadline) {
			s.t.Logf("busiest worker %s: %d executions in the last second", best.ID, count[best.ID])
			return best
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// memberEpoch is the epoch of worker id's current assignment in the leader's view (0 if none).
func (s *scenario) memberEpoch(id string) uint64 {
	s.t.Helper()
	_, v, err := s.c.Leader(s.ctx(10 * time.Second))
	if err != nil {
		s.t.Fatalf("leader view: %v", err)
	}
	r, _ := s.c.RingOf(v)
	var epoch uint64
	for _, m := range r.Members {
		if m.WorkerID == id && m.State == "active" {
			epoch = max(epoch, m.Epoch)
		}
	}
	return epoch
}

// waitSettled waits until the ring has exactly the running workers and covers every token.
func (s *scenario) waitSettled() {
	s.t.Helper()
	if _, err := s.c.WaitSettled(s.ctx(time.Minute)); err != nil {
		s.t.Fatal(err)
	}
}

// stopWatch is a timestamp in the log, to read the logs of processes against the test's steps.
func (s *scenario) mark(format string, args ...any) time.Time {
	now := time.Now()
	s.t.Logf("%s %s", now.Format("15:04:05.000"), fmt.Sprintf(format, args...))
	return now
}
