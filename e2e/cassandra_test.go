package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/testkit/cassandratest"
)

// cassandraNode is the Cassandra that scripts/cassandra.sh manages, with the settings it runs
// with now, so that a restart brings back the same node: the script writes its yaml from the
// environment on every start, and `make test` exports settings a bare `go test` does not.
type cassandraNode struct {
	script string
	env    []string
}

// managedCassandra returns the script's node. A test that restarts Cassandra needs the node the
// script manages: it fails (never skips, which would hide a missing test) when the tests'
// Cassandra is another one: RETRYRING_CASSANDRA pointing elsewhere, or the port answered by a
// node the script did not start (another checkout's, say), which is not ours to restart.
func managedCassandra(t *testing.T) cassandraNode {
	t.Helper()
	port := os.Getenv("CASSANDRA_PORT")
	if port == "" {
		port = "9042"
	}
	if addr := cassandratest.Addr(); addr != "127.0.0.1:"+port && addr != "localhost:"+port {
		t.Fatalf("%s restarts the Cassandra that scripts/cassandra.sh manages (127.0.0.1:%s), but the tests use %s; "+
			"run it against the managed node (make test does), or leave it out with -skip %s", t.Name(), port, addr, t.Name())
	}
	home := os.Getenv("CASSANDRA_HOME_DIR")
	if home == "" {
		home = filepath.Join(root, ".cassandra")
	}
	n := cassandraNode{script: filepath.Join(root, "scripts", "cassandra.sh")}
	yaml, err := os.Open(filepath.Join(home, "conf", "cassandra.yaml"))
	if err != nil {
		t.Fatalf("settings of the running Cassandra: %v", err)
	}
	defer yaml.Close()
	settings := map[string]string{
		"commitlog_sync": "CASSANDRA_COMMITLOG_SYNC", "commitlog_sync_period": "CASSANDRA_COMMITLOG_SYNC_PERIOD",
		"commitlog_sync_group_window": "CASSANDRA_COMMITLOG_GROUP_WINDOW",
		"tombstone_warn_threshold":    "CASSANDRA_TOMBSTONE_WARN", "tombstone_failure_threshold": "CASSANDRA_TOMBSTONE_FAIL",
	}
	sc := bufio.NewScanner(yaml)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if env, known := settings[strings.TrimSpace(k)]; ok && known {
			n.env = append(n.env, env+"="+strings.TrimSpace(v))
		}
	}
	if pid, err := os.ReadFile(filepath.Join(home, "cassandra.pid")); err == nil {
		if cmdline, err := os.ReadFile("/proc/" + strings.TrimSpace(string(pid)) + "/cmdline"); err == nil {
			for _, arg := range strings.Split(string(cmdline), "\x00") {
				if heap, ok := strings.CutPrefix(arg, "-Xmx"); ok {
					n.env = append(n.env, "CASSANDRA_HEAP="+heap)
				}
			}
		}
	}
	// A restart on a loaded machine has taken up to 331 s (docs/cassandra.md); the script's own
	// default bound (180 s) is for a first start by hand. outage's context bounds it all.
	if os.Getenv("CASSANDRA_START_TIMEOUT") == "" {
		n.env = append(n.env, fmt.Sprintf("CASSANDRA_START_TIMEOUT=%d", int(cassandraRestartBound.Seconds())))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := n.run(ctx, "status"); err != nil {
		t.Fatalf("%s restarts the Cassandra that scripts/cassandra.sh manages in %s, and that node is not the one "+
			"answering (another checkout's on the same port?): %v\n%s", t.Name(), home, err, out)
	}
	return n
}

// cassandraRestartBound is how long the test lets a restarted Cassandra take to answer CQL.
const cassandraRestartBound = 8 * time.Minute

// run runs the script with args.
func (n cassandraNode) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, n.script, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), n.env...)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// running reports whether the node answers CQL.
func (n cassandraNode) running(ctx context.Context) bool {
	_, err := n.run(ctx, "status")
	return err == nil
}

// restore starts the node if it is not answering: whatever happened in the test, Cassandra is
// left running for the tests after it.
func (n cassandraNode) restore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if n.running(ctx) {
		return
	}
	out, err := n.run(ctx, "start")
	if err != nil {
		t.Errorf("Cassandra left stopped, and restarting it failed: %v\n%s", err, out)
		return
	}
	t.Logf("restored Cassandra: %s", lastLine(out))
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// outage stops Cassandra with how ("drain": nodetool drain then stop; "kill": SIGKILL) and starts
// it again, and records the outage as a fault. With giveUp, Cassandra stays stopped until every
// worker said it gave its ranges back (at most giveUpBound from the stop), so the
// workers' way out and back is exercised whatever the machine's speed: how long nodetool takes to
// start, or Cassandra to come up, decides nothing. Every Cassandra client of the test process must
// reconnect afterwards (scenario.reconnect).
func (s *scenario) outage(n cassandraNode, how string, giveUp bool) {
	s.t.Helper()
	ctx := s.ctx(2*time.Minute + cassandraLostAfter + lostSlack + cassandraRestartBound)
	at := s.mark("Cassandra %s", how)
	out, err := n.run(ctx, how)
	if err != nil {
		s.t.Fatalf("scripts/cassandra.sh %s: %v\n%s", how, err, out)
	}
	stopped := s.mark("Cassandra stopped: %s", lastLine(out))
	if giveUp {
		s.waitGaveUp(stopped.Add(giveUpBound))
	}
	out, err = n.run(ctx, "start")
	if err != nil {
		s.t.Fatalf("scripts/cassandra.sh start: %v\n%s", err, out)
	}
	up := s.mark("Cassandra up: %s", lastLine(out))
	s.addFault(fault{kind: storeOutage, at: at, stopped: stopped, until: up})
	s.reconnect()
}

// giveUpLine is what a worker logs when Cassandra was unreachable past --cassandra-lost-after.
const giveUpLine = "cassandra lost for too long: giving the ranges back"

// gaveUp reports which workers said, so far, that they gave their ranges back.
func (s *scenario) gaveUp() (yes, no []string) {
	s.t.Helper()
	for _, w := range s.c.Workers() {
		b, err := os.ReadFile(w.LogPath())
		if err != nil {
			s.t.Fatal(err)
		}
		if strings.Contains(string(b), giveUpLine) {
			yes = append(yes, w.ID)
		} else {
			no = append(no, w.ID)
		}
	}
	return yes, no
}

// waitGaveUp waits, while Cassandra is stopped, until every worker said it gave its ranges back,
// and fails the test if one has not by deadline: a worker that cannot reach Cassandra past
// --cassandra-lost-after must not sit on its ranges.
func (s *scenario) waitGaveUp(deadline time.Time) {
	s.t.Helper()
	for {
		yes, no := s.gaveUp()
		if len(no) == 0 {
			s.mark("every worker gave its ranges back: %v", yes)
			return
		}
		if time.Now().After(deadline) {
			s.t.Errorf("Cassandra stopped for %v (--cassandra-lost-after %v), and workers %v have not said they gave their ranges back (%v have)",
				giveUpBound, cassandraLostAfter, no, yes)
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestCassandraRestart drains and stops Cassandra in the middle of a drain and starts it again.
// Executions answered while it was down cannot be marked COMMITTED and may run again; nothing may
// be lost. The workers stay up through the outage (not ready from their first failed check); an
// outage longer than their --cassandra-lost-after (30 s) makes each give its ranges back, and
// every one of them is ready again, back in its ring, once Cassandra is. It runs alone: every
// other scenario needs Cassandra (and so do other packages' tests, which is why `make test` runs
// this package after the others).
func TestCassandraRestart(t *testing.T) {
	node := managedCassandra(t)
	s := newScenario(t, shortOptions())
	t.Cleanup(func() { node.restore(t) }) // runs before the cluster and keyspace cleanups
	s.waitSettled()
	s.recordBackdated(3000)
	s.waitExecutions(300)
	s.outage(node, "drain", true)
	s.waitWorkersBack(2 * time.Minute)
	s.waitDrained(drainWait)
	s.check()
}

// cassandraLostAfter is the workers' --cassandra-lost-after (their default), and lostSlack what
// it takes a worker beyond it to see the loss: a check a second, each bounded by 5 s.
const (
	cassandraLostAfter = 30 * time.Second
	lostSlack          = 10 * time.Second
	// giveUpBound is how long outage waits, from the stop, for every worker to say it gave its
	// ranges back. The loss starts at a worker's first failed check, which can take a check
	// period and its 5 s timeout after the stop, and the give-up comes at the first check
	// cassandraLostAfter later, which can take them again; a loaded machine adds more. Waiting
	// longer costs nothing when the workers are on time: the wait ends when the last one says it.
	giveUpBound = cassandraLostAfter + 3*lostSlack
)

// waitWorkersBack waits, after the last Cassandra outage, until every worker answers /readyz 200
// again: the worker process outlived the outage and, if it gave its ranges back, rejoined. When
// Cassandra was stopped for giveUpBound or longer, each worker must have said in its log that it
// gave its ranges back. The time counts from the stop, not from the
// command that stops it: nodetool drain alone can take 15 s on a loaded machine, while Cassandra
// still answers.
func (s *scenario) waitWorkersBack(bound time.Duration) {
	s.t.Helper()
	var last fault
	for _, f := range s.faults {
		if f.kind == storeOutage {
			last = f
		}
	}
	ctx := s.ctx(bound)
	for _, w := range s.c.Workers() {
		if err := w.WaitReady(ctx); err != nil {
			s.t.Fatalf("worker %s not ready within %v of Cassandra's return: %v", w.ID, bound, err)
		}
	}
	s.mark("every worker ready again")
	if last.until.Sub(last.stopped) < giveUpBound {
		return
	}
	if _, no := s.gaveUp(); len(no) > 0 {
		s.t.Errorf("Cassandra was stopped %v, past --cassandra-lost-after %v, and workers %v do not say in their logs that they gave their ranges back",
			last.until.Sub(last.stopped).Round(time.Second), cassandraLostAfter, no)
	}
}
