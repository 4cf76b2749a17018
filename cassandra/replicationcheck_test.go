package cassandra_test

import (
	"errors"
	"testing"

	"github.com/retryring/retryring/cassandra"
)

func TestCheckReplication(t *testing.T) {
	one := cassandra.Datacenters{"datacenter1": 1}
	three := cassandra.Datacenters{"dc1": 3}
	two := cassandra.Datacenters{"dc1": 2, "dc2": 1}
	for _, c := range []struct {
		name, spec string
		cluster    cassandra.Datacenters
		want       string // the whole error message; "" for accepted
	}{
		{"default factor on one node", "", one, ""},
		{"factor 1 on one node", "1", one, ""},
		{"factor 3 on one node", "3", one, "cassandra: replication refused: replication 3 needs 3 nodes; the cluster has 1 node in datacenter1"},
		{"factor 3 on three nodes", "3", three, ""},
		{"factor 3 counts every datacenter", "3", two, ""},
		{"factor 4 on three nodes", "4", two, "cassandra: replication refused: replication 4 needs 4 nodes; the cluster has 2 nodes in dc1, 1 node in dc2"},
		{"dc1=3 on a one-node laptop", "dc1=3", one, "cassandra: replication refused: replication dc1=3 needs 3 nodes in dc1; the cluster has 1 node in datacenter1"},
		{"dc1=3 on three nodes of dc1", "dc1=3", three, ""},
		{"dc1=1,dc2=1 on two datacenters", "dc1=1,dc2=1", two, ""},
		{"dc1=2,dc2=1 fills both", "dc1=2,dc2=1", two, ""},
		{"dc1=3 beyond dc1's nodes", "dc1=3,dc2=1", two, "cassandra: replication refused: replication dc1=3,dc2=1 needs 3 nodes in dc1; the cluster has 2 nodes in dc1, 1 node in dc2"},
		{"every shortfall named", "dc1=3,dc2=3", two, "cassandra: replication refused: replication dc1=3,dc2=3 needs 3 nodes in dc1 and 3 nodes in dc2; the cluster has 2 nodes in dc1, 1 node in dc2"},
		{"a datacenter the cluster lacks", "dc1=1,dc2=1", three, "cassandra: replication refused: replication dc1=1,dc2=1 needs 1 node in dc2; the cluster has 3 nodes in dc1"},
		{"a wrongly cased datacenter", "DC1=1", three, "cassandra: replication refused: replication DC1=1 needs 1 node in DC1; the cluster has 3 nodes in dc1"},
		{"no node known", "1", cassandra.Datacenters{}, "cassandra: replication refused: replication 1 needs 1 node; the cluster has no node"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := cassandra.ParseReplication(c.spec)
			if err != nil {
				t.Fatal(err)
			}
			err = cassandra.CheckReplication(r, c.cluster)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("CheckReplication(%s, %v) = %v; want accepted", c.spec, c.cluster, err)
			case c.want != "" && (err == nil || err.Error() != c.want || !errors.Is(err, cassandra.ErrReplicationUnmet)):
				t.Fatalf("CheckReplication(%s, %v) = %v;\nwant %s (ErrReplicationUnmet)", c.spec, c.cluster, err, c.want)
			}
		})
	}
}
