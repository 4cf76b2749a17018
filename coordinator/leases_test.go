package coordinator

import (
	"errors"
	"testing"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/lease"
)

func TestLeasesCoverTheRingAndSplitAfterARelease(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	addrs := c.rsocketAddrs()

	// a starts on a follower: it must follow not_leader to the leader.
	a := newTestWorker(t, "a", c.followers(leader)[0].RSocketAddr()).start()
	eventually(t, 10*time.Second, "a holds the whole ring as Node-0", func() bool {
		return a.holds(lease.Ranges{lease.FullRing}, 0, 1)
	})
	first, _ := a.latest()
	if first.via != leader.RSocketAddr() || first.lease.Epoch == 0 || first.lease.TTL != testTiming.TTL ||
		first.lease.Renewal != testTiming.Renewal {
		t.Fatalf("first lease %+v via %s", first.lease, first.via)
	}

	b := newTestWorker(t, "b", addrs...).start()
	split := lease.Split(2)
	eventually(t, 10*time.Second, "a and b split the ring", func() bool {
		return a.holds(lease.Ranges{split[0]}, 0, 2) && b.holds(lease.Ranges{split[1]}, 1, 2)
	})

	// Renewals keep the epoch and keep coming.
	settledA, _ := a.latest()
	settledB, _ := b.latest()
	eventually(t, 5*time.Second, "three renewals of each", func() bool {
		return len(a.history()) >= countUpTo(a, settledA)+3 && len(b.history()) >= countUpTo(b, settledB)+3
	})
	for _, g := range a.history()[countUpTo(a, settledA):] {
		if g.lease.Epoch != settledA.lease.Epoch {
			t.Fatalf("a's epoch changed on renewal: %d then %d", settledA.lease.Epoch, g.lease.Epoch)
		}
	}
	checkExclusive(t, a, b)

	v := leader.View()
	if len(v.Rings) != 1 || len(v.Rings[0].Members) != 2 {
		t.Fatalf("view: %+v", v.Rings)
	}
	for _, m := range v.Rings[0].Members {
		if m.State != admin.MemberActive || m.LeaseExpiresMs == 0 || len(m.Ranges) != 1 {
			t.Errorf("member %+v", m)
		}
	}
}

// countUpTo is the number of elements up to and including g.
func countUpTo(w *testWorker, g gotLease) int {
	for i, h := range w.history() {
		if h.at.Equal(g.at) {
			return i + 1
		}
	}
	return 0
}

func TestNode0MovesOnlyAfterTheDeadWorkersLeaseEnded(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	a := newTestWorker(t, "a", leader.RSocketAddr()).start()
	eventually(t, 10*time.Second, "a holds the ring", func() bool { return a.holds(lease.Ranges{lease.FullRing}, 0, 1) })
	b := newTestWorker(t, "b", leader.RSocketAddr()).start()
	split := lease.Split(2)
	eventually(t, 10*time.Second, "a and b split the ring", func() bool {
		return a.holds(lease.Ranges{split[0]}, 0, 2) && b.holds(lease.Ranges{split[1]}, 1, 2)
	})

	// a, Node-0, crashes: its connection closes and it releases nothing.
	a.close()
	lastA, _ := a.latest()
	eventually(t, 10*time.Second, "b holds the whole ring as Node-0", func() bool {
		return b.holds(lease.Ranges{lease.FullRing}, 0, 1)
	})
	for _, g := range b.history() {
		if (g.lease.IsNode0() || g.lease.Ranges.Overlaps(lease.Ranges{split[0]})) && g.at.Before(lastA.lease.ExpiresAt()) {
			t.Fatalf("b got a's range or Node-0 at %v, before a's lease ended at %v", g.at, lastA.lease.ExpiresAt())
		}
	}
	checkExclusive(t, a, b)
	eventually(t, 5*time.Second, "a gone from the view", func() bool {
		v := leader.View()
		return len(v.Rings) == 1 && len(v.Rings[0].Members) == 1 && v.Rings[0].Members[0].WorkerID == "b"
	})
}

func TestLeaveFreesEverythingAtOnce(t *testing.T) {
	c := newCluster(t, 1, nil)
	leader := c.leader()
	a := newTestWorker(t, "a", leader.RSocketAddr()).start()
	b := newTestWorker(t, "b", leader.RSocketAddr()).start()
	split := lease.Split(2)
	eventually(t, 10*time.Second, "a and b split the ring", func() bool {
		return (a.holds(lease.Ranges{split[0]}, 0, 2) && b.holds(lease.Ranges{split[1]}, 1, 2)) ||
			(b.holds(lease.Ranges{split[0]}, 0, 2) && a.holds(lease.Ranges{split[1]}, 1, 2))
	})
	leaveAt := time.Now()
	if err := a.leave(); err != nil {
		t.Fatal(err)
	}
	a.close()
	lastA, _ := a.latest()
	eventually(t, 10*time.Second, "b holds the whole ring", func() bool { return b.holds(lease.Ranges{lease.FullRing}, 0, 1) })
	full, _ := b.latest()
	if !full.at.Before(lastA.lease.ExpiresAt()) {
		// Not a failure of safety, but leave exists so that nobody waits for the TTL.
		t.Logf("b got the ring %v after a's leave, not before a's lease would have ended", full.at.Sub(leaveAt))
	}
	checkExclusive(t, a, b)
}

// TestNewerConnectionOfTheSameIncarnationWins: a reconnect after a network blip may arrive while
// the server still holds the old connection; the newer one replaces it and the lease continues.
func TestNewerConnectionOfTheSameIncarnationWins(t *testing.T) {
	c := newCluster(t, 1, nil)
	leader := c.leader()
	a := newTestWorker(t, "a", leader.RSocketAddr())
	a.noReconnect = true
	a.start()
	eventually(t, 10*time.Second, "a holds the ring", func() bool { return a.holds(lease.Ranges{lease.FullRing}, 0, 1) })
	before, _ := a.latest()

	again := newTestWorker(t, "a", leader.RSocketAddr()).start() // same id and incarnation
	eventually(t, 5*time.Second, "the older connection closed", func() bool { return a.lastStreamErr() != nil })
	eventually(t, 5*time.Second, "the newer connection renewed", func() bool {
		g, ok := again.latest()
		return ok && g.lease.Epoch == before.lease.Epoch && g.lease.Ranges.Equal(before.lease.Ranges)
	})
	v := leader.View()
	if m := v.Rings[0].Members; len(m) != 1 || m[0].State != admin.MemberActive || m[0].Epoch != before.lease.Epoch {
		t.Fatalf("members %+v: the member must have stayed active on its epoch", m)
	}
}

// TestNewIncarnationWaitsForTheOldOnesLease: a restarted process (new incarnation) replaces the old
// one's connection and gets nothing before the old incarnation's lease has ended. When the old
// process is still alive and keeps reconnecting (a zombie), the newer incarnation keeps the worker
// id: the old one is refused instead of taking the ring back.
func TestNewIncarnationWaitsForTheOldOnesLease(t *testing.T) {
	for _, alive := range []bool{false, true} {
		t.Run(map[bool]string{false: "old stopped", true: "old still alive"}[alive], func(t *testing.T) {
			c := newCluster(t, 1, nil)
			leader := c.leader()
			old := newTestWorker(t, "w", leader.RSocketAddr())
			old.noReconnect = !alive
			old.start()
			eventually(t, 10*time.Second, "the old incarnation holds the ring", func() bool {
				return old.holds(lease.Ranges{lease.FullRing}, 0, 1)
			})

			restarted := newTestWorker(t, "w", leader.RSocketAddr())
			restarted.inc = "w-inc2"
			restarted.start()
			eventually(t, 5*time.Second, "the old connection closed", func() bool { return old.lastStreamErr() != nil })
			lastOld, _ := old.latest()
			eventually(t, 10*time.Second, "the new incarnation holds the ring", func() bool {
				return restarted.holds(lease.Ranges{lease.FullRing}, 0, 1)
			})
			for _, g := range restarted.history() {
				if (!g.lease.Ranges.Empty() || g.lease.IsNode0()) && g.at.Before(lastOld.lease.ExpiresAt()) {
					t.Fatalf("new incarnation got %v node %d at %v, before the old lease ended at %v",
						g.lease.Ranges, g.lease.NodeIndex, g.at, lastOld.lease.ExpiresAt())
				}
			}
			if alive {
				var we *lease.WireError
				eventually(t, 5*time.Second, "the old incarnation refused as superseded", func() bool {
					return errors.As(old.lastStreamErr(), &we) && we.Code == lease.CodeDuplicate
				})
				if g, _ := old.latest(); g.lease.Epoch != lastOld.lease.Epoch {
					t.Fatalf("the superseded incarnation got epoch %d after it was replaced", g.lease.Epoch)
				}
			}
			checkExclusive(t, old, restarted)
		})
	}
}
