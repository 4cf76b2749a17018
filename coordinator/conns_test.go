package coordinator

import (
	"testing"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// A superseded incarnation's connection never counts, whether the newer incarnation is connected
// or between two connections, and a connection that was current when its incarnation was
// superseded stops counting: otherwise the leader joins the old incarnation again, the newer one
// (holding nothing yet) is forgotten, and the two take the worker id from each other for as long
// as both run (TestNewIncarnationWaitsForTheOldLease/alive failed so in CI).
func TestSupersededConnectionNeverCounts(t *testing.T) {
	ring := lease.RingKey{Region: "r", Cluster: "c", Service: "s"}
	conn := func(incarnation string) *workerConn {
		s := lease.Setup{WorkerID: "a", Incarnation: incarnation, Region: ring.Region, Cluster: ring.Cluster, Service: ring.Service}
		return &workerConn{setup: s, member: newMemberID(s), streams: map[*leaseStream]struct{}{}}
	}
	retired := map[memberID]bool{}
	reg := newConnRegistry(func() {}, func(m memberID) bool { return retired[m] })
	counted := func() []string {
		var out []string
		for m := range reg.states() {
			out = append(out, m.Incarnation)
		}
		return out
	}

	old := conn("old")
	reg.add(old)
	if got := counted(); len(got) != 1 || got[0] != "old" {
		t.Fatalf("before any supersede the old incarnation's connection counts: %v", got)
	}
	retired[newMemberID(old.setup)] = true // a newer incarnation's Join applied
	if got := counted(); len(got) != 0 {
		t.Fatalf("the superseded incarnation's current connection still counts: %v", got)
	}

	reg.remove(old) // the newer incarnation is between connections: nothing is current
	again := conn("old")
	if replaced := reg.add(again); replaced != nil {
		t.Fatalf("the superseded incarnation's reconnect replaced a connection")
	}
	if got := counted(); len(got) != 0 {
		t.Fatalf("the superseded incarnation's reconnect became current while no connection was: %v", got)
	}

	young := conn("young")
	if replaced := reg.add(young); replaced != nil {
		t.Fatalf("the newer incarnation replaced %v; the superseded one was never current", replaced.member)
	}
	if reg.add(conn("old")) != nil {
		t.Fatal("a superseded reconnect replaced the newer incarnation's connection")
	}
	if got := counted(); len(got) != 1 || got[0] != "young" {
		t.Fatalf("counted %v, want the newer incarnation alone", got)
	}
}

// Before the newer incarnation's Join is applied, the older process reconnecting does not take the
// place back (the two would take it from each other on every reconnect, and the Join would never be
// committed); if the newer one goes away first, the older one's waiting connection goes on.
func TestOlderIncarnationDoesNotTakeThePlaceBack(t *testing.T) {
	ring := lease.RingKey{Region: "r", Cluster: "c", Service: "s"}
	reg := newConnRegistry(func() {}, func(memberID) bool { return false })
	next := uint64(0)
	conn := func(incarnation string) *workerConn {
		next++
		s := lease.Setup{WorkerID: "a", Incarnation: incarnation, Region: ring.Region, Cluster: ring.Cluster, Service: ring.Service}
		return &workerConn{id: next, setup: s, member: newMemberID(s), streams: map[*leaseStream]struct{}{}}
	}
	current := func() string {
		var out []string
		for m := range reg.states() {
			out = append(out, m.Incarnation)
		}
		if len(out) != 1 {
			t.Fatalf("%d current connections for one worker id: %v", len(out), out)
		}
		return out[0]
	}

	x1 := conn("x")
	reg.add(x1)
	y1 := conn("y")
	if replaced := reg.add(y1); replaced != x1 {
		t.Fatalf("the new incarnation did not replace the old one's connection (replaced %v)", replaced)
	}
	reg.remove(x1) // the caller closed it
	x2 := conn("x")
	if replaced := reg.add(x2); replaced != nil || current() != "y" {
		t.Fatalf("the older incarnation's reconnect took the place back (replaced %v, current %s)", replaced, current())
	}
	y2 := conn("y")
	if replaced := reg.add(y2); replaced != y1 || current() != "y" {
		t.Fatalf("the newer incarnation's reconnect did not replace its own connection (replaced %v)", replaced)
	}
	reg.remove(y1)
	x3 := conn("x")
	if replaced := reg.add(x3); replaced != nil || current() != "y" {
		t.Fatalf("after the newer incarnation reconnected, the older one took the place back (replaced %v)", replaced)
	}
	reg.remove(y2) // the newer process went away before its Join
	if got := current(); got != "x" {
		t.Fatalf("after the newer incarnation left, current is %s; want the older one's waiting connection", got)
	}
	if !reg.remove(reg.byWorker[workerKey(x3.member)]) {
		t.Fatal("the promoted connection is not current")
	}
}

// TestOnlyAJoinMayShowASupersede: the retired set looks at the state after a restore and after an
// entry that joins an incarnation (alone or in a pass), not after the entries that cannot add one.
func TestOnlyAJoinMayShowASupersede(t *testing.T) {
	for _, tc := range []struct {
		c    fsm.Command
		want bool
	}{
		{nil, true},
		{&fsm.Join{Ring: testRing, WorkerID: "a", Incarnation: "a-2"}, true},
		{&fsm.Reconcile{Ring: testRing, Joins: []fsm.MemberRef{{WorkerID: "a", Incarnation: "a-2"}}}, true},
		{&fsm.Reconcile{Ring: testRing, Downs: []fsm.MemberRef{{WorkerID: "a", Incarnation: "a-1"}}}, false},
		{&fsm.Release{Ring: testRing, WorkerID: "a", Incarnation: "a-1", Epoch: 3}, false},
		{&fsm.Down{Ring: testRing, WorkerID: "a", Incarnation: "a-1"}, false},
		{&fsm.Pause{Ring: testRing}, false},
	} {
		if got := mayShowASupersede(tc.c); got != tc.want {
			t.Errorf("mayShowASupersede(%T %+v) = %v, want %v", tc.c, tc.c, got, tc.want)
		}
	}
}
