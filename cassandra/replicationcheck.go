package cassandra

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/gocql/gocql"
)

// Datacenters counts the nodes of a cluster per datacenter, as system.local and system.peers
// name them.
type Datacenters map[string]int

// Nodes is the cluster's node count.
func (d Datacenters) Nodes() int {
	n := 0
	for _, c := range d {
		n += c
	}
	return n
}

// String names the counts in a stable order: "1 node in datacenter1", "2 nodes in dc1, 1 node
// in dc2".
func (d Datacenters) String() string {
	if len(d) == 0 {
		return "no node"
	}
	dcs := make([]string, 0, len(d))
	for dc := range d {
		dcs = append(dcs, dc)
	}
	sort.Strings(dcs)
	parts := make([]string, len(dcs))
	for i, dc := range dcs {
		parts[i] = nodes(d[dc]) + " in " + dc
	}
	return strings.Join(parts, ", ")
}

func nodes(n int) string {
	if n == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", n)
}

// Spec is the replication in the flag form ParseReplication reads: "3", "dc1=3,dc2=3".
func (r Replication) Spec() string {
	if len(r.DataCenters) == 0 {
		return fmt.Sprint(max(r.Factor, 1))
	}
	dcs := make([]string, 0, len(r.DataCenters))
	for dc := range r.DataCenters {
		dcs = append(dcs, dc)
	}
	sort.Strings(dcs)
	parts := make([]string, len(dcs))
	for i, dc := range dcs {
		parts[i] = fmt.Sprintf("%s=%d", dc, r.DataCenters[dc])
	}
	return strings.Join(parts, ",")
}

// CheckReplication reports ErrReplicationUnmet, with every shortfall, when the cluster has fewer
// nodes than the replication places replicas on: SimpleStrategy needs Factor nodes anywhere,
// NetworkTopologyStrategy its factor in each datacenter it names. Cassandra itself accepts such a
// keyspace, and then every write at a quorum fails ("Cannot achieve consistency level
// LOCAL_QUORUM"), or, for a datacenter name it does not know, no replica is written there at all.
func CheckReplication(r Replication, cluster Datacenters) error {
	var short []string
	if len(r.DataCenters) == 0 {
		if f := max(r.Factor, 1); cluster.Nodes() < f {
			short = append(short, nodes(f))
		}
	} else {
		dcs := make([]string, 0, len(r.DataCenters))
		for dc := range r.DataCenters {
			dcs = append(dcs, dc)
		}
		sort.Strings(dcs)
		for _, dc := range dcs {
			if f := r.DataCenters[dc]; cluster[dc] < f {
				short = append(short, nodes(f)+" in "+dc)
			}
		}
	}
	if len(short) == 0 {
		return nil
	}
	return fmt.Errorf("%w: replication %s needs %s; the cluster has %s", ErrReplicationUnmet, r.Spec(), strings.Join(short, " and "), cluster)
}

// ReadDatacenters counts the nodes of the session's cluster per datacenter: the node that
// answers and every peer it knows (system.peers), up or down: replicas are placed on nodes
// whether they run or not. One node's view, so that each node is counted once whichever answers.
func ReadDatacenters(ctx context.Context, s *gocql.Session) (Datacenters, error) {
	iter := s.Query(`SELECT data_center FROM system.peers`).WithContext(ctx).Iter()
	d := Datacenters{}
	var dc string
	for iter.Scan(&dc) {
		d[dc]++
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("cassandra: read the datacenters: system.peers: %w", err)
	}
	own, err := ownDatacenter(ctx, s, iter.Host())
	if err != nil {
		return nil, fmt.Errorf("cassandra: read the datacenters: %w", err)
	}
	d[own]++
	return d, nil
}

// ownDatacenter is the datacenter of node h: as the driver learnt it, or, when it did not look
// the ring up (DisableInitialHostLookup), from h's system.local. The driver picks the node of a
// query, so system.local is read until h answers, a few tries.
func ownDatacenter(ctx context.Context, s *gocql.Session, h *gocql.HostInfo) (string, error) {
	if h == nil {
		return "", errors.New("the driver did not say which node answered")
	}
	if dc := h.DataCenter(); dc != "" {
		return dc, nil
	}
	for range 16 {
		iter := s.Query(`SELECT data_center FROM system.local WHERE key = 'local'`).WithContext(ctx).Iter()
		var dc string
		iter.Scan(&dc)
		if err := iter.Close(); err != nil {
			return "", fmt.Errorf("system.local: %w", err)
		}
		if a := iter.Host(); a != nil && a.ConnectAddress().Equal(h.ConnectAddress()) && a.Port() == h.Port() {
			return dc, nil
		}
	}
	return "", fmt.Errorf("node %s never answered a read of its system.local", h.ConnectAddress())
}
