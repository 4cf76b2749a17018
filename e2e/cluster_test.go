//go:build cluster

// The data plane on a Cassandra cluster of three nodes (issue 19): `make test-cluster` starts the
// cluster with scripts/cassandra.sh cluster-start, runs these tests with -tags cluster, and stops
// it. They fail, never skip, when the cluster is not running.

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/internal/downstream"
	"github.com/retryring/retryring/internal/proc"
)

// clusterNodes is the cluster's node count ($CASSANDRA_CLUSTER_NODES, as the script reads it);
// node K listens on 127.0.0.(K+1):9042.
func clusterNodes(t *testing.T) int {
	t.Helper()
	n := 3
	if v := os.Getenv("CASSANDRA_CLUSTER_NODES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("CASSANDRA_CLUSTER_NODES=%q: not a node count", v)
		}
	}
	return n
}

func nodeAddr(k int) string { return fmt.Sprintf("127.0.0.%d:9042", k+1) }

// requireCluster fails the test unless every node of the one-datacenter cluster answers CQL and
// names the others as its peers, and returns the address of node 1, the contact point.
func requireCluster(t *testing.T) string {
	t.Helper()
	n := clusterNodes(t)
	for k := 1; k <= n; k++ {
		host, port, _ := net.SplitHostPort(nodeAddr(k))
		c := gocql.NewCluster(host)
		c.Port, _ = strconv.Atoi(port)
		c.ProtoVersion = 4
		c.DisableInitialHostLookup = true
		c.Timeout, c.ConnectTimeout = 20*time.Second, 5*time.Second
		s, err := c.CreateSession()
		if err != nil {
			t.Fatalf("Cassandra cluster node %d not reachable at %s: %v: run `make cassandra-cluster-start`", k, nodeAddr(k), err)
		}
		dcs, err := cassandra.ReadDatacenters(context.Background(), s)
		s.Close()
		if err != nil {
			t.Fatalf("cluster node %d: %v", k, err)
		}
		if dcs["dc1"] != n || len(dcs) != 1 {
			t.Fatalf("cluster node %d at %s sees %s; want %d nodes in dc1 (`make cassandra-cluster-start`, one datacenter)", k, nodeAddr(k), dcs, n)
		}
	}
	return nodeAddr(1)
}

// clusterScript runs scripts/cassandra.sh with a cluster-* command and returns its output.
func clusterScript(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "cassandra.sh"), args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/cassandra.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// clusterWait bounds the start of a scenario on the Cassandra cluster: the schema is applied on
// every node and waits for their agreement (over 60 s, proc.DefaultWait, once at load average 35).
const clusterWait = 3 * time.Minute

// TestClusterSchemaApply applies the schema with dc1=3 on the three nodes, and refuses dc1=4 and
// a datacenter the cluster lacks, with the reason.
func TestClusterSchemaApply(t *testing.T) {
	contact := requireCluster(t)
	n := clusterNodes(t)
	ks := keyspaceName(t.Name())
	t.Setenv("RETRYRING_CASSANDRA", contact) // dropKeyspace's session
	t.Cleanup(func() { dropKeyspace(t, ks) })
	apply := func(replication string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, binary, "schema", "apply", "--cassandra", contact, "--keyspace", ks,
			"--replication", replication).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	refused := map[string]string{
		fmt.Sprintf("dc1=%d", n+1): fmt.Sprintf("retryring: cassandra: replication refused: replication dc1=%d needs %d nodes in dc1; the cluster has %d nodes in dc1", n+1, n+1, n),
		"dc1=1,dc2=1":              fmt.Sprintf("retryring: cassandra: replication refused: replication dc1=1,dc2=1 needs 1 node in dc2; the cluster has %d nodes in dc1", n),
		strconv.Itoa(n + 1):        fmt.Sprintf("retryring: cassandra: replication refused: replication %d needs %d nodes; the cluster has %d nodes in dc1", n+1, n+1, n),
	}
	for replication, want := range refused {
		if out, err := apply(replication); err == nil || !strings.Contains(out, want) {
			t.Errorf("schema apply --replication %s: %v\n%s\nwant refused with %q", replication, err, out, want)
		}
	}
	want := fmt.Sprintf("dc1=%d", n)
	if out, err := apply(want); err != nil || out != "schema applied to keyspace "+ks {
		t.Fatalf("schema apply --replication %s on %d nodes: %v\n%s", want, n, err, out)
	}
	cfg := gocql.NewCluster(strings.TrimSuffix(contact, ":9042"))
	cfg.ProtoVersion = 4
	s, err := cfg.CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var repl map[string]string
	if err := s.Query(`SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = ?`, ks).Scan(&repl); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(repl["class"], "NetworkTopologyStrategy") || repl["dc1"] != strconv.Itoa(n) || len(repl) != 2 {
		t.Fatalf("replication of %s: %v; want NetworkTopologyStrategy with dc1: %d", ks, repl, n)
	}
}

// TestClusterDrainWithNodeKilled drains failures at LOCAL_QUORUM with replication dc1=3 while
// node 3 is killed with SIGKILL a quarter into the drain: nothing is lost and a step runs twice
// only where the node's death explains it (a COMMITTED marker whose write it coordinated). Then
// the node is started again, and a second batch drains on all three, through a node that missed
// the writes made while it was down (no hints: reads at LOCAL_QUORUM repair it).
func TestClusterDrainWithNodeKilled(t *testing.T) {
	contact := requireCluster(t)
	n := clusterNodes(t)
	t.Setenv("RETRYRING_CASSANDRA", contact) // the scenario's cluster, sessions and keyspace
	o := shortOptions()
	o.Wait = clusterWait
	o.Replication = fmt.Sprintf("dc1=%d", n)
	s := newScenario(t, o)
	s.waitSettled()

	// Into the next window in real time, not backdated: a backdated import writes each 1,000 as
	// one instance, and then a single worker would do all the work.
	const count = 600
	s.record(proc.RecordOptions{Count: count})
	s.waitExecutions(count / 4)
	at := s.mark("kill node %d", n)
	out := clusterScript(t, "cluster-kill", strconv.Itoa(n))
	t.Log(out)
	// What the dead node coordinated, or was writing, in its last moments and until the drivers
	// stopped sending to it, may have failed after the step was answered done: such a step runs
	// again. Drivers see the connection reset at once; 15 s is a generous bound for that.
	s.addFault(fault{kind: storeOutage, at: at, until: at.Add(15 * time.Second)})
	drained := s.waitDrained(drainWait)
	s.mark("drained with node %d down", n)
	logLongestPause(t, s.ds.Executions())

	t.Log(clusterScript(t, "cluster-start", strconv.Itoa(n)))
	s.mark("node %d back", n)
	s.reconnect()
	s.record(proc.RecordOptions{Count: 150})
	s.waitDrained(drainWait)
	s.mark("second batch drained on %d nodes (first drained %s)", n, drained.Format("15:04:05.000"))
	s.check()
}

// logLongestPause logs the longest time between two consecutive starts of executions, from the
// first to the last: the pause a node's death caused, if any. A figure, not a check.
func logLongestPause(t *testing.T, es []downstream.Execution) {
	if len(es) < 2 {
		return
	}
	var longest time.Duration
	var after time.Time
	for i := 1; i < len(es); i++ {
		if d := es[i].Start.Sub(es[i-1].Start); d > longest {
			longest, after = d, es[i-1].Start
		}
	}
	t.Logf("longest pause between executions: %v after %s; %d executions from %s to %s", longest.Round(time.Millisecond),
		after.Format("15:04:05.000"), len(es), es[0].Start.Format("15:04:05.000"), es[len(es)-1].Start.Format("15:04:05.000"))
}

// TestClusterTwoNodesDown kills two of the three nodes mid-drain, so that no write or read at
// LOCAL_QUORUM can succeed: the workers stay up, `record` fails with a clear error and says that
// nothing was recorded, nothing already recorded is lost, and the drain resumes and finishes once
// one node is back. Then the third node is started again, leaving the cluster as it found it.
// Meanwhile every worker's /readyz says not ready, with the failed cycles and Cassandra's "Cannot
// achieve consistency level LOCAL_QUORUM", and ready again once node 2 is back. It logs how often
// each worker logged a failed cycle (its retry pace against Cassandra).
func TestClusterTwoNodesDown(t *testing.T) {
	contact := requireCluster(t)
	n := clusterNodes(t)
	if n != 3 {
		t.Fatalf("this test needs the cluster of 3 nodes (CASSANDRA_CLUSTER_NODES=%d)", n)
	}
	t.Setenv("RETRYRING_CASSANDRA", contact)
	o := shortOptions()
	o.Wait = clusterWait
	o.Replication = "dc1=3"
	s := newScenario(t, o)
	s.waitSettled()

	const count = 600
	s.record(proc.RecordOptions{Count: count})
	s.waitExecutions(count / 4)
	failedBefore := cycleFailures(t, s.c.Workers())
	at := s.mark("kill nodes 2 and 3")
	t.Log(clusterScript(t, "cluster-kill", "2", "3"))

	b, err := s.c.Record(s.ctx(2*time.Minute), proc.RecordOptions{Count: 30, Instances: 1, Concurrency: 1})
	s.uncertain = append(s.uncertain, b)
	// The first error is Cassandra's "Cannot achieve consistency level LOCAL_QUORUM" once node 1
	// marked the others down, a timeout before (seen: "gocql: no response received from cassandra
	// within timeout period" 16 s after the kill): the summary says which.
	if err == nil || !strings.Contains(b.Output, "recorded none of 30 failures across 1 instances in ") ||
		!strings.Contains(b.Output, "every write failed (") || !strings.Contains(b.Output, "statements sent); first error: recorder: ") {
		t.Errorf("record with two of three nodes down: %v\n%s\nwant every write failed, with the first error", err, b.Output)
	}
	t.Logf("record with two nodes down said: %s", b.Output)
	// The session's check (system.local at ONE) passes on node 1; the cycles at LOCAL_QUORUM
	// fail, and readiness follows them (docs/operations.md, "Workers and their dependencies").
	for _, w := range s.c.Workers() {
		if !w.Running() {
			t.Errorf("worker %s exited with two of three Cassandra nodes down", w.ID)
		}
		got := waitReadyz(t, w, 3*time.Minute, func(r string) bool {
			return strings.HasPrefix(r, "503 ") && strings.Contains(r, `"reason":"cassandra: `) &&
				strings.Contains(r, " cycles failed in a row, for ") && strings.Contains(r, "Cannot achieve consistency level LOCAL_QUORUM")
		})
		t.Logf("%s /readyz with two nodes down: %s", w.ID, got)
	}
	down := time.Since(at)
	failedDuring := cycleFailures(t, s.c.Workers())
	for id, c := range failedDuring {
		t.Logf("%s logged %d failed cycles in the %v since the kill", id, c-failedBefore[id], down.Round(time.Second))
	}

	t.Log(clusterScript(t, "cluster-start", "2"))
	back := s.mark("node 2 back")
	s.addFault(fault{kind: storeOutage, at: at, until: back.Add(15 * time.Second)})
	s.reconnect()
	for _, w := range s.c.Workers() {
		t.Logf("%s /readyz with node 2 back: %s", w.ID, waitReadyz(t, w, 3*time.Minute, func(r string) bool {
			return strings.HasPrefix(r, "200 ")
		}))
	}
	s.waitDrained(drainWait)
	s.mark("drained with node 3 down")
	logLongestPause(t, s.ds.Executions())
	t.Log(clusterScript(t, "cluster-start", "3"))
	s.check()
}

// cycleFailures counts, per worker, the "cycle failed" lines of its log.
func cycleFailures(t *testing.T, ws []*proc.Worker) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, w := range ws {
		b, err := os.ReadFile(w.LogPath())
		if err != nil {
			t.Fatalf("%s log: %v", w.ID, err)
		}
		out[w.ID] = strings.Count(string(b), `"message":"cycle failed"`)
	}
	return out
}

// waitReadyz asks the worker's /readyz every second until its answer ("STATUS BODY") satisfies
// want, and returns it; after limit it fails the test with the last answer.
func waitReadyz(t *testing.T, w *proc.Worker, limit time.Duration, want func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		got := readyz(w)
		if want(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s /readyz still %s after %v", w.ID, got, limit)
		}
		time.Sleep(time.Second)
	}
}

// readyz is a worker's /readyz answer: status and body.
func readyz(w *proc.Worker) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.URL("/readyz"), nil)
	if err != nil {
		return err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
}
