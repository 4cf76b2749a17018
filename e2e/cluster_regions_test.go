//go:build cluster

package e2e

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/proctest"
)

// The two-datacenter layout of TestClusterTwoRegions: 4 nodes, nodes 1-2 in dc1 (127.0.0.2-3),
// nodes 3-4 in dc2 (127.0.0.4-5), as `CASSANDRA_CLUSTER_NODES=4 CASSANDRA_CLUSTER_DCS=2
// scripts/cassandra.sh cluster-start` lays them out (make test-cluster does).
const (
	regionNodes   = 4
	regionDCs     = 2
	regionReplica = "dc1=2,dc2=2"
)

// requireTwoDatacenters fails the test unless the script's environment names the two-datacenter
// layout (the test kills and starts nodes through it) and every node answers CQL and sees two
// nodes in each datacenter.
func requireTwoDatacenters(t *testing.T) {
	t.Helper()
	if os.Getenv("CASSANDRA_CLUSTER_NODES") != strconv.Itoa(regionNodes) || os.Getenv("CASSANDRA_CLUSTER_DCS") != strconv.Itoa(regionDCs) {
		t.Fatalf("this test needs the cluster of %d nodes in %d datacenters: run it with CASSANDRA_CLUSTER_NODES=%d CASSANDRA_CLUSTER_DCS=%d, after `make cassandra-cluster-start` with the same (make test-cluster does both)",
			regionNodes, regionDCs, regionNodes, regionDCs)
	}
	for k := 1; k <= regionNodes; k++ {
		host, port, _ := net.SplitHostPort(nodeAddr(k))
		c := gocql.NewCluster(host)
		c.Port, _ = strconv.Atoi(port)
		c.ProtoVersion = 4
		c.DisableInitialHostLookup = true
		c.Timeout, c.ConnectTimeout = 20*time.Second, 5*time.Second
		s, err := c.CreateSession()
		if err != nil {
			t.Fatalf("Cassandra cluster node %d not reachable at %s: %v: run `CASSANDRA_CLUSTER_NODES=%d CASSANDRA_CLUSTER_DCS=%d make cassandra-cluster-start`",
				k, nodeAddr(k), err, regionNodes, regionDCs)
		}
		dcs, err := cassandra.ReadDatacenters(context.Background(), s)
		s.Close()
		if err != nil {
			t.Fatalf("cluster node %d: %v", k, err)
		}
		if dcs["dc1"] != 2 || dcs["dc2"] != 2 || len(dcs) != 2 {
			t.Fatalf("cluster node %d at %s sees %s; want 2 nodes in dc1 and 2 in dc2", k, nodeAddr(k), dcs)
		}
	}
}

// newRegion starts one region of the two-region deployment docs/cassandra.md ("Two regions")
// describes: its own coordinator cluster and ring (region name = its datacenter's), workers
// and records that reach Cassandra through a node of their datacenter with --local-dc, and
// checks that read the region's rows at LOCAL_QUORUM in that datacenter. All regions share one
// keyspace (replication dc1=2,dc2=2) and the service name, so that the markers of a step are
// the same rows in both.
func newRegion(t *testing.T, ks, dc, contact, service string, applySchema bool) *scenario {
	t.Helper()
	o := shortOptions()
	o.Binary = binary
	o.Wait = clusterWait
	// One coordinator and two workers a region keep two regions, four Cassandra nodes and the
	// stubs within 2 cores; a real region runs three voters.
	o.Coordinators, o.Workers = 1, 2
	// Slow enough that both regions are mid-drain when dc2 is killed (40 executions a second
	// per region): region dc2 must have work left to resume.
	o.Downstream.Latency, o.Downstream.Jitter = 200*time.Millisecond, 50*time.Millisecond
	o.Keyspace, o.Cassandra = ks, contact
	o.Replication, o.SkipSchema = regionReplica, !applySchema
	o.Ring = lease.RingKey{Region: dc, Cluster: "c1", Service: service}
	o.WorkerArgs = []string{"--local-dc", dc}
	o.LogLevel = os.Getenv("E2E_LOG_LEVEL")
	s := &scenario{t: t, ks: ks}
	s.dbConfig = func(cfg *gocql.ClusterConfig) {
		host, _, _ := net.SplitHostPort(contact)
		cfg.Hosts = []string{host}
		cfg.Consistency = gocql.LocalQuorum
		cfg.HostFilter = gocql.DataCentreHostFilter(dc)
		cfg.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.DCAwareRoundRobinPolicy(dc))
	}
	s.c = proctest.NewCluster(t, o)
	s.ds = s.c.Downstream
	t.Cleanup(func() {
		if s.session != nil {
			s.session.Close()
		}
	})
	return s
}

// recordIn records into the region through its own datacenter (--local-dc). It records into
// the next window in real time, and a write not done when that window starts fails; so when the
// window is about to start it waits for the one after (seen: 28 of 300 failed with 1.3 s left).
func (s *scenario) recordIn(dc string, o proc.RecordOptions) proc.Batch {
	s.t.Helper()
	window := time.Duration(s.c.Options().WindowMinutes) * time.Minute
	if left := time.Until(time.Now().Truncate(window).Add(window)); o.Backdate == 0 && left < 15*time.Second {
		time.Sleep(left + time.Second)
	}
	o.Env = append(o.Env, "RETRYRING_LOCAL_DC="+dc)
	return s.record(o)
}

// TestClusterTwoRegions: two regions, each a ring with its own coordinator and workers pinned to
// its datacenter, drain at LOCAL_QUORUM on one keyspace of dc1=2,dc2=2. Every node of dc2 is
// SIGKILLed mid-drain: region dc1 keeps draining and finishes (0 lost, a step twice only where a
// fault explains it); region dc2's workers stay up, not ready, and resume when dc2 returns, and
// finish too. Then the mirror: all of dc1 (its seed node among them) down mid-drain, region dc2
// drains on, region dc1 resumes when dc1 returns. And what docs/cassandra.md says of exactly-once across regions: a step committed
// in dc1 while dc2 was down (and hinted handoff is off in the test cluster, as a hint window
// may run out in production) has no COMMITTED in dc2, so the same step recorded into region dc2
// runs there again: once per region, never twice within one.
func TestClusterTwoRegions(t *testing.T) {
	requireTwoDatacenters(t)
	requireBinary(t, "coordinator", "worker", "record", "schema")
	contact1, contact2 := nodeAddr(1), nodeAddr(3)
	t.Setenv("RETRYRING_CASSANDRA", contact1) // dropKeyspace's session
	ks := keyspaceName(t.Name())
	t.Cleanup(func() { dropKeyspace(t, ks) })
	service := spreadService(shortName(t.Name()), shortInstances, 2)
	r1 := newRegion(t, ks, "dc1", contact1, service, true)
	r2 := newRegion(t, ks, "dc2", contact2, service, false)
	r1.waitSettled()
	r2.waitSettled()

	const count = 300
	r1.recordIn("dc1", proc.RecordOptions{Count: count, Prefix: "tx-dc1-"})
	r2.recordIn("dc2", proc.RecordOptions{Count: count, Prefix: "tx-dc2-"})
	r1.waitExecutions(count / 4)
	r2.waitExecutions(count / 4)
	at := r1.mark("kill nodes 3 and 4: all of dc2")
	t.Log(clusterScript(t, "cluster-kill", "3", "4"))
	before2 := len(r2.ds.Executions())
	r1.waitDrained(drainWait)
	r1.mark("region dc1 drained with dc2 down")

	// Region dc2's workers cannot reach a node of their datacenter (--local-dc keeps them
	// from using dc1's): not ready, and up.
	for _, w := range r2.c.Workers() {
		if !w.Running() {
			t.Errorf("worker %s of region dc2 exited with dc2 down", w.ID)
		}
		t.Logf("%s (dc2) /readyz with dc2 down: %s", w.ID, waitReadyz(t, w, 2*time.Minute, func(r string) bool {
			return strings.HasPrefix(r, "503 ") && strings.Contains(r, `"reason":"cassandra unreachable: `)
		}))
	}

	// A batch recorded and committed in dc1 while dc2 is down: its COMMITTED markers are in dc1
	// only.
	// Backdated (readable at once): make test-cluster has no minute to wait for a window.
	cross := r1.recordIn("dc1", proc.RecordOptions{Count: 30, Instances: 1, Prefix: "tx-both-", Backdate: backdate})
	r1.waitDrained(drainWait)
	r1.mark("cross-region batch committed in dc1")

	// Counted before the start: the workers resume as soon as both nodes answer CQL, while the
	// script still waits for the ring.
	during2 := len(r2.ds.Executions())
	if during2 >= count {
		t.Fatalf("region dc2 executed %d of its %d steps before dc2 came back (%d by the kill): nothing was left to resume", during2, count, before2)
	}
	t.Log(clusterScript(t, "cluster-start", "3", "4"))
	back := r2.mark("dc2 back")
	// Region dc2's workers lost Cassandra from the kill until dc2 answered again: an execution
	// answered done whose COMMITTED could not be written runs again.
	r2.addFault(fault{kind: storeOutage, at: at, until: back.Add(15 * time.Second)})
	for _, w := range r2.c.Workers() {
		t.Logf("%s (dc2) /readyz with dc2 back: %s", w.ID, waitReadyz(t, w, 3*time.Minute, func(r string) bool {
			return strings.HasPrefix(r, "200 ")
		}))
	}
	r2.waitDrained(drainWait)
	r2.mark("region dc2 drained after dc2 came back: %d executions by the kill, %d more while dc2 was down, %d after",
		before2, during2-before2, len(r2.ds.Executions())-during2)

	// The same steps recorded into region dc2: dc2's replicas of their markers never saw the
	// COMMITTED written in dc1, so region dc2 runs each once more.
	r2.recordIn("dc2", proc.RecordOptions{Count: cross.Count, Instances: 1, Prefix: cross.Prefix, Backdate: backdate})
	r2.waitDrained(drainWait)
	r2.mark("cross-region batch drained in dc2")
	done1, done2 := r1.ds.DoneIDs(), r2.ds.DoneIDs()
	for _, id := range cross.IDs() {
		if !done1[id] || !done2[id] {
			t.Errorf("%s recorded in both regions: done in dc1 %v, in dc2 %v; want both (docs/cassandra.md, Two regions)", id, done1[id], done2[id])
		}
		if n1, n2 := len(r1.ds.ExecutionsOf(id)), len(r2.ds.ExecutionsOf(id)); n1 != 1 || n2 != 1 {
			t.Errorf("%s: %d executions in dc1, %d in dc2; want one in each", id, n1, n2)
		}
	}

	// The mirror: all of dc1 down (its seed node among them) while both regions drain a second
	// batch. Region dc2 keeps draining, and records and drains a third batch meanwhile; region
	// dc1's workers stay up, not ready, and finish when dc1 is back.
	base1, base2 := len(r1.ds.Executions()), len(r2.ds.Executions())
	r1.recordIn("dc1", proc.RecordOptions{Count: count, Prefix: "tx-dc1-b-", Backdate: backdate})
	r2.recordIn("dc2", proc.RecordOptions{Count: count, Prefix: "tx-dc2-b-", Backdate: backdate})
	r1.waitExecutions(base1 + count/4)
	r2.waitExecutions(base2 + count/4)
	at1 := r2.mark("kill nodes 1 and 2: all of dc1")
	t.Log(clusterScript(t, "cluster-kill", "1", "2"))
	r2.waitDrained(drainWait)
	r2.recordIn("dc2", proc.RecordOptions{Count: count / 2, Prefix: "tx-dc2-c-", Backdate: backdate})
	r2.waitDrained(drainWait)
	r2.mark("region dc2 drained its second and third batches with dc1 down")
	for _, w := range r1.c.Workers() {
		if !w.Running() {
			t.Errorf("worker %s of region dc1 exited with dc1 down", w.ID)
		}
		t.Logf("%s (dc1) /readyz with dc1 down: %s", w.ID, waitReadyz(t, w, 2*time.Minute, func(r string) bool {
			return strings.HasPrefix(r, "503 ") && strings.Contains(r, `"reason":"cassandra unreachable: `)
		}))
	}
	during1 := len(r1.ds.Executions())
	if during1 >= base1+count {
		t.Fatalf("region dc1 executed %d of its second %d steps before dc1 came back: nothing was left to resume", during1-base1, count)
	}
	t.Log(clusterScript(t, "cluster-start", "1", "2"))
	back1 := r1.mark("dc1 back")
	r1.reconnect() // its check session saw every node of its datacenter die
	r1.addFault(fault{kind: storeOutage, at: at1, until: back1.Add(15 * time.Second)})
	for _, w := range r1.c.Workers() {
		t.Logf("%s (dc1) /readyz with dc1 back: %s", w.ID, waitReadyz(t, w, 3*time.Minute, func(r string) bool {
			return strings.HasPrefix(r, "200 ")
		}))
	}
	r1.waitDrained(drainWait)
	r1.mark("region dc1 drained its second batch after dc1 came back: %d executions while dc1 was down or before, %d after",
		during1-base1, len(r1.ds.Executions())-during1)

	r1.check()
	r2.check()
	logLongestPause(t, r1.ds.Executions())
	logLongestPause(t, r2.ds.Executions())
}
