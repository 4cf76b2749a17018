package leader

import (
	"testing"
	"time"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func testTimes() Times {
	return Times{
		ElectedAt:      t0,
		LeaderLease:    250 * time.Millisecond,
		HolderBound:    testTiming.HolderBound(),
		InheritedBound: testTiming.HolderBound(),
		GraceEnd:       t0.Add(750 * time.Millisecond).Add(2 * time.Second),
	}
}

func apply(t *testing.T, s *fsm.State, cmds ...fsm.Command) {
	t.Helper()
	for _, c := range cmds {
		if err := s.Apply(c); err != nil {
			t.Fatalf("apply %+v: %v", c, err)
		}
	}
}

func planAll(t *testing.T, s *fsm.State) {
	t.Helper()
	if a := fsm.Plan(s.Ring(testRing)); a != nil {
		apply(t, s, a)
	}
}

func mid(worker string) Member {
	return Member{Ring: fsm.RingID(testRing), WorkerID: worker, Incarnation: worker + "-1"}
}

func join(worker string) *fsm.Join {
	return &fsm.Join{Ring: testRing, WorkerID: worker, Incarnation: worker + "-1"}
}

// twoMembers is a ring where a (Node-0, first half) and b (second half) are settled.
func twoMembers(t *testing.T) *fsm.State {
	s := fsm.NewState()
	apply(t, s, join("a"))
	planAll(t, s)
	apply(t, s, join("b"))
	planAll(t, s)
	a := s.Ring(testRing).Members[mid("a").Key()]
	apply(t, s, &fsm.Release{Ring: testRing, WorkerID: "a", Incarnation: "a-1", Epoch: a.Epoch})
	planAll(t, s)
	if !s.Ring(testRing).Settled() {
		t.Fatalf("not settled: %+v", s.Ring(testRing))
	}
	return s
}

var noSends = Sends{}

func decide(s *fsm.State, now time.Time, tt Times, conns map[Member]Conn, sends Sends) RingDecisions {
	return DecideRing(now, tt, fsm.RingID(testRing), s.Ring(testRing), conns, sends)
}

func live(ids ...Member) map[Member]Conn {
	out := map[Member]Conn{}
	for _, m := range ids {
		out[m] = Conn{Ring: testRing, Live: true, Streaming: true}
	}
	return out
}

func TestDecideJoinsStreamingConnectionsOnly(t *testing.T) {
	s := fsm.NewState()
	apply(t, s, join("a"))
	conns := live(mid("a"), mid("b"))
	conns[mid("c")] = Conn{Ring: testRing, Live: true} // connected, no stream yet
	d := decide(s, t0, testTimes(), conns, noSends)
	if len(d.Joins) != 1 || d.Joins[0].WorkerID != "b" {
		t.Fatalf("joins %+v, want b only (a is active, c does not stream)", d.Joins)
	}
	apply(t, s, &fsm.Down{Ring: testRing, WorkerID: "a", Incarnation: "a-1"})
	if d := decide(s, t0, testTimes(), live(mid("a")), noSends); len(d.Joins) != 1 || d.Joins[0].WorkerID != "a" {
		t.Fatalf("a reconnect of a departed member must join again: %+v", d.Joins)
	}
}

// TestDecideDownWaitsForTheReconnectWindowEvenIfSeen: within the reconnect window nobody is
// down, not even a member that came back in this term and lost its connection again (right after a
// failover, fresh connections drop on a busy leader, and their leases live on); past it, down.
func TestDecideDownWaitsForTheReconnectWindowEvenIfSeen(t *testing.T) {
	s := twoMembers(t)
	tt := testTimes()
	conns := live(mid("a"))
	d := decide(s, t0.Add(time.Second), tt, conns, noSends)
	if len(d.Downs) != 0 || !d.Wake.Equal(tt.DownAfter()) {
		t.Fatalf("b has not had its grace yet: downs %+v wake %v", d.Downs, d.Wake)
	}
	d = decide(s, t0.Add(time.Second), tt, conns, noSends)
	if len(d.Downs) != 0 || !d.Wake.Equal(tt.DownAfter()) {
		t.Fatalf("b came back in this term and dropped again, within the window: downs %+v wake %v", d.Downs, d.Wake)
	}
	d = decide(s, tt.DownAfter(), tt, conns, noSends)
	if len(d.Downs) != 1 || d.Downs[0].WorkerID != "b" {
		t.Fatalf("b was connected during this term and is gone, past the window: downs %+v", d.Downs)
	}
	d = decide(s, tt.DownAfter(), tt, conns, noSends)
	if len(d.Downs) != 1 || d.Downs[0].WorkerID != "b" {
		t.Fatalf("past the grace: downs %+v", d.Downs)
	}
	ended := live(mid("a"))
	ended[mid("b")] = Conn{Ring: testRing} // stream ended, connection open
	if d := decide(s, tt.DownAfter(), tt, ended, noSends); len(d.Downs) != 1 {
		t.Fatalf("a member whose stream ended is down: %+v", d.Downs)
	}
}

// TestDecideDownWaitsForTheOldLeadersLastLease: past the reconnect grace, a member that has not
// come back to the new leader may still be at work on a lease of the old one, which may last until
// holdsAliveUntil (here, under a longer committed timing, well past the grace): it is not down
// before then, and neither is one that came back during this term and dropped again.
func TestDecideDownWaitsForTheOldLeadersLastLease(t *testing.T) {
	s := twoMembers(t)
	tt := testTimes()
	tt.InheritedBound = lease.Timing{TTL: 10 * time.Second}.HolderBound()
	lastLease := tt.ElectedAt.Add(tt.LeaderLease).Add(tt.InheritedBound)
	if !lastLease.After(tt.GraceEnd) || !tt.DownAfter().Equal(lastLease) {
		t.Fatalf("down after %v, want the old leader's last lease's end %v, past the grace %v", tt.DownAfter(), lastLease, tt.GraceEnd)
	}
	conns := live(mid("a"))
	for _, now := range []time.Time{tt.GraceEnd, lastLease.Add(-time.Nanosecond)} {
		if d := decide(s, now, tt, conns, noSends); len(d.Downs) != 0 || !d.Wake.Equal(lastLease) {
			t.Fatalf("at %v b may still hold a lease of the old leader: downs %+v, wake %v", now.Sub(t0), d.Downs, d.Wake)
		}
	}
	if d := decide(s, lastLease, tt, conns, noSends); len(d.Downs) != 1 || d.Downs[0].WorkerID != "b" {
		t.Fatalf("once its last lease may have ended, b is down: %+v", d.Downs)
	}
	if d := decide(s, tt.ElectedAt.Add(time.Second), tt, conns, noSends); len(d.Downs) != 0 {
		t.Fatalf("b came back in this term and dropped, within the window: not down yet, got %+v", d.Downs)
	}
}

func TestDecideNewLeaderTreatsEveryHoldAsAliveUntilItsFloor(t *testing.T) {
	s := twoMembers(t)
	apply(t, s, &fsm.Down{Ring: testRing, WorkerID: "b", Incarnation: "b-1"})
	tt := testTimes()
	floor := tt.ElectedAt.Add(tt.LeaderLease).Add(tt.HolderBound)
	conns := live(mid("a"))
	if d := decide(s, floor, tt, conns, noSends); len(d.Expires) != 0 || !d.Wake.After(floor) {
		t.Fatalf("at the floor nothing expires: %+v", d)
	}
	d := decide(s, floor.Add(time.Nanosecond), tt, conns, noSends)
	b := s.Ring(testRing).Members[mid("b").Key()]
	if len(d.Expires) != 1 || d.Expires[0].WorkerID != "b" || d.Expires[0].UpTo != b.Epoch ||
		d.Expires[0].Generation != s.Ring(testRing).Generation {
		t.Fatalf("past the floor b's epoch %d expires at generation %d: %+v", b.Epoch, s.Ring(testRing).Generation, d.Expires)
	}
}

func TestDecideExpiresOnlyAfterTheLastSendOfTheEpochPlusTheHolderBound(t *testing.T) {
	s := twoMembers(t)
	apply(t, s, &fsm.Down{Ring: testRing, WorkerID: "b", Incarnation: "b-1"})
	b := s.Ring(testRing).Members[mid("b").Key()]
	tt := testTimes()
	log := Sends{}
	lastSent := t0.Add(10 * time.Second) // long after the floor
	log.Record(mid("b"), b.Epoch, lastSent)
	conns := live(mid("a"))
	check := func(now time.Time) RingDecisions { return decide(s, now, tt, conns, log) }
	due := lastSent.Add(tt.HolderBound)
	if d := check(due); len(d.Expires) != 0 || !d.Wake.After(due) {
		t.Fatalf("at lastSent + bound nothing expires: %+v", d)
	}
	if d := check(due.Add(time.Nanosecond)); len(d.Expires) != 1 {
		t.Fatalf("past lastSent + bound b expires: %+v", d)
	}
	// A worker uses the element answering a demand sent before lastSent for at most TTL; the
	// coordinator's bound covers it with drift and margin to spare.
	if tt.HolderBound <= testTiming.TTL {
		t.Fatalf("holder bound %v must exceed the TTL %v", tt.HolderBound, testTiming.TTL)
	}
}

func TestDecideExpiresUpToTheHighestDueEpochOfEachMember(t *testing.T) {
	s := fsm.NewState()
	apply(t, s, join("a"))
	planAll(t, s) // a: whole ring, epoch e1
	e1 := s.Ring(testRing).Members[mid("a").Key()].Epoch
	apply(t, s, join("b"))
	planAll(t, s) // a shrinks: e2; its second half is a hold of e1
	e2 := s.Ring(testRing).Members[mid("a").Key()].Epoch
	apply(t, s, &fsm.Down{Ring: testRing, WorkerID: "a", Incarnation: "a-1"})
	// holds of a: e1 (older) and e2 (current of a departed member)
	tt := testTimes()
	log := Sends{}
	sent1 := t0.Add(5 * time.Second)
	sent2 := t0.Add(9 * time.Second)
	log.Record(mid("a"), e1, sent1)
	log.Record(mid("a"), e2, sent2)
	conns := live(mid("b"))
	d := decide(s, sent1.Add(tt.HolderBound).Add(time.Millisecond), tt, conns, log)
	if len(d.Expires) != 1 || d.Expires[0].UpTo != e1 {
		t.Fatalf("only e1 is due: %+v", d.Expires)
	}
	d = decide(s, sent2.Add(tt.HolderBound).Add(time.Millisecond), tt, conns, log)
	if len(d.Expires) != 1 || d.Expires[0].UpTo != e2 {
		t.Fatalf("e1 and e2 are due: %+v", d.Expires)
	}
}

func TestSendsLastUpToAndPrune(t *testing.T) {
	log := Sends{}
	m := mid("a")
	for i, e := range []uint64{3, 5, 8} {
		log.Record(m, e, t0.Add(time.Duration(i)*time.Second))
	}
	log.Record(m, 5, t0) // an earlier send of a recorded epoch changes nothing
	lastUpTo := func(e uint64) (time.Time, bool) { return log.LastUpTo(m, e) }
	if _, ok := lastUpTo(2); ok {
		t.Fatal("nothing sent up to epoch 2")
	}
	if at, _ := lastUpTo(7); !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("up to 7: %v", at)
	}
	// The state needs epochs from 7 on: 5 stays (the latest below 7), 3 goes.
	log.Prune(func(Member) (uint64, bool) { return 7, true })
	if at, _ := lastUpTo(7); !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("after prune, up to 7: %v", at)
	}
	if _, ok := lastUpTo(4); ok {
		t.Fatal("epoch 3 should be pruned")
	}
	log.Prune(func(Member) (uint64, bool) { return 0, false })
	if _, ok := lastUpTo(100); ok {
		t.Fatal("a member gone from the state is forgotten")
	}
}

// The new leader's floor is what protects leases an older leader sent: an element sent at any time
// before electedAt + leaderLease is covered by the floor.
func TestHoldsAliveUntilCoversTheOldLeadersLastPossibleSend(t *testing.T) {
	tt := testTimes()
	lastOldSend := tt.ElectedAt.Add(tt.LeaderLease)
	if tt.HoldsAliveUntil().Before(testTiming.PossiblyAliveUntil(lastOldSend)) {
		t.Fatal("floor earlier than the end of the old leader's last element")
	}
}

// A leader running a shorter timing than the longest committed one waits, from its election,
// for the leader lease plus the longest one's holder bound before it expires anything or
// retires that timing; a retirement needs its own timing committed and the longest one longer.
func TestDecideRetireWaitsOutTheLongestTiming(t *testing.T) {
	long := fsm.NewLeaseTiming("c1", lease.Timing{TTL: 10 * time.Second, Renewal: 2 * time.Second})
	own := fsm.NewLeaseTiming("c2", lease.Timing{TTL: 3 * time.Second, Renewal: time.Second})
	tt := testTimes()
	tt.HolderBound, tt.InheritedBound = own.HolderBound(), long.HolderBound()
	due := tt.ElectedAt.Add(tt.LeaderLease).Add(long.HolderBound())
	if !tt.HoldsAliveUntil().Equal(due) {
		t.Fatalf("holds alive until %v, want the longest timing's bound %v", tt.HoldsAliveUntil(), due)
	}
	ts := &fsm.TimingState{InForce: own, Longest: long}
	if r, wake := DecideRetire(due, tt, ts, own); r != nil || !wake.After(due) {
		t.Fatalf("at the bound: retire %+v, wake %v", r, wake)
	}
	r, _ := DecideRetire(due.Add(time.Nanosecond), tt, ts, own)
	if r == nil || r.Retire != long || r.Keep != own {
		t.Fatalf("past the bound: retire %+v", r)
	}
	for name, ts := range map[string]*fsm.TimingState{
		"no timing committed":       nil,
		"own timing not in force":   {InForce: long, Longest: long},
		"own timing is the longest": {InForce: own, Longest: own},
		"the longest is not longer": {InForce: own, Longest: fsm.NewLeaseTiming("c3", lease.Timing{TTL: time.Second, Renewal: 500 * time.Millisecond})},
	} {
		if r, wake := DecideRetire(due.Add(time.Hour), tt, ts, own); r != nil || !wake.IsZero() {
			t.Errorf("%s: retire %+v, wake %v", name, r, wake)
		}
	}
}
