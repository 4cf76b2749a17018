package leader

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// settledRing is a ring of members w0..w(k-1), settled: every member holds its equal share and
// nothing else.
func settledRing(t *rapid.T, k int) *fsm.State {
	s := fsm.NewState()
	must := func(c fsm.Command) {
		if err := s.Apply(c); err != nil {
			t.Fatalf("apply %+v: %v", c, err)
		}
	}
	for i := range k {
		must(join(fmt.Sprintf("w%d", i)))
	}
	for range 2 * k {
		if a := fsm.Plan(s.Ring(testRing)); a != nil {
			must(a)
		}
		for _, m := range s.Ring(testRing).SortedMembers() {
			if m.Assigned() {
				must(&fsm.Release{Ring: testRing, WorkerID: m.WorkerID, Incarnation: m.Incarnation, Epoch: m.Epoch})
			}
		}
	}
	if !s.Ring(testRing).Settled() {
		t.Fatalf("not settled: %+v", s.Ring(testRing))
	}
	return s
}

// returning is when one member of the old leader comes back to the new one, and whether it drops
// again later (a crash during this term).
type returning struct {
	back, drops bool
	backAt      time.Time
	dropAt      time.Time
}

func (r returning) live(now time.Time) bool {
	return r.back && !now.Before(r.backAt) && (!r.drops || now.Before(r.dropAt))
}

// TestDecideAFailoverAloneChangesNoAssignment runs generated failovers on decideRing's clock: a
// ring settled under an earlier leader, a new leader elected at t0 with a lease timing whose bound
// may end before or after its reconnect grace, members coming back to it at generated instants
// (or never) and maybe dropping again, reconcile passes at generated instants applying what
// decideRing decides, then fsm.Plan. A member without a connection, whether it came back in this
// term and dropped again or never came back, is committed down only once both the grace and its
// last lease from the earlier leader (holdsAliveUntil) may have ended; it is down at the first
// pass past that.
// When every member came back before that bound and stayed, no assignment changed.
func TestDecideAFailoverAloneChangesNoAssignment(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ttl := time.Duration(rapid.IntRange(1000, 15000).Draw(t, "ttl_ms")) * time.Millisecond
		timing := lease.Timing{TTL: ttl, Renewal: ttl / 5}.WithDefaults()
		grace := time.Duration(rapid.IntRange(0, 4000).Draw(t, "grace_ms")) * time.Millisecond
		tt := Times{
			ElectedAt: t0, LeaderLease: defaultLeaderLease,
			HolderBound: timing.HolderBound(), InheritedBound: timing.HolderBound(),
			GraceEnd: t0.Add(defaultSilenceTimeout).Add(grace),
		}
		// The rule, stated apart from Times.downAfter.
		notBefore := t0.Add(defaultLeaderLease).Add(timing.HolderBound())
		if tt.GraceEnd.After(notBefore) {
			notBefore = tt.GraceEnd
		}
		horizonMs := int((notBefore.Sub(t0) + 2*time.Second) / time.Millisecond)
		at := func(label string) time.Time {
			return t0.Add(time.Duration(rapid.IntRange(0, horizonMs).Draw(t, label)) * time.Millisecond)
		}

		k := rapid.IntRange(1, 5).Draw(t, "members")
		s := settledRing(t, k)
		before := map[string]fsm.Member{}
		for key, m := range s.Ring(testRing).Members {
			before[key] = *m
		}
		ret := map[Member]returning{}
		inTime := true // every member comes back before notBefore and stays
		for i := range k {
			m := mid(fmt.Sprintf("w%d", i))
			r := returning{back: rapid.Bool().Draw(t, "back")}
			if r.back {
				r.backAt = at("back_at")
				if r.drops = rapid.Bool().Draw(t, "drops"); r.drops {
					r.dropAt = r.backAt.Add(time.Duration(rapid.IntRange(1, horizonMs).Draw(t, "drop_after_ms")) * time.Millisecond)
				}
			}
			inTime = inTime && r.back && r.backAt.Before(notBefore) && !r.drops
			ret[m] = r
		}
		passes := make([]time.Time, rapid.IntRange(1, 12).Draw(t, "passes"))
		for i := range passes {
			passes[i] = at("pass_at")
		}
		slices.SortFunc(passes, func(a, b time.Time) int { return a.Compare(b) })

		seen := map[Member]bool{}
		sends := Sends{}
		for _, now := range passes {
			r := s.Ring(testRing).Clone()
			conns := map[Member]Conn{}
			for m, rt := range ret {
				if rt.live(now) {
					conns[m] = Conn{Ring: testRing, Live: true, Streaming: true}
					seen[m] = true
				}
			}
			d := DecideRing(now, tt, fsm.RingID(testRing), r, conns, sends)
			downs := map[Member]bool{}
			for _, dn := range d.Downs {
				m := Member{Ring: fsm.RingID(testRing), WorkerID: dn.WorkerID, Incarnation: dn.Incarnation}
				downs[m] = true
				switch {
				case conns[m].Live:
					t.Fatalf("at %v: %s is connected, yet down", now.Sub(t0), dn.WorkerID)
				case now.Before(notBefore):
					t.Fatalf("at %v: %s (seen in this term: %v) is down before %v (grace ends %v, its lease from the old leader may last until %v)",
						now.Sub(t0), dn.WorkerID, seen[m], notBefore.Sub(t0), tt.GraceEnd.Sub(t0), tt.HoldsAliveUntil().Sub(t0))
				}
			}
			for _, mm := range r.SortedMembers() {
				m := Member{Ring: fsm.RingID(testRing), WorkerID: mm.WorkerID, Incarnation: mm.Incarnation}
				if mm.Active && !conns[m].Live && !now.Before(notBefore) && !downs[m] {
					t.Fatalf("at %v: %s (seen in this term: %v) is gone and due, yet not down", now.Sub(t0), mm.WorkerID, seen[m])
				}
			}
			for _, c := range d.Commands() {
				if err := s.Apply(c); err != nil {
					t.Fatalf("apply %+v: %v", c, err)
				}
			}
			if a := fsm.Plan(s.Ring(testRing)); a != nil {
				if err := s.Apply(a); err != nil {
					t.Fatalf("apply %+v: %v", a, err)
				}
			}
			// The leader renews every live member at this pass.
			for m := range conns {
				if mm := s.Ring(testRing).Members[m.Key()]; mm != nil && mm.Active && mm.Assigned() {
					sends.Record(m, mm.Epoch, now)
				}
			}
		}
		if !inTime {
			return
		}
		for key, m := range s.Ring(testRing).Members {
			b := before[key]
			if !m.Active || m.Epoch != b.Epoch || m.NodeIndex != b.NodeIndex || !m.Ranges.Equal(b.Ranges) {
				t.Fatalf("every member came back in time, yet %s changed: epoch %d node %d %v active %v, was epoch %d node %d %v",
					m.WorkerID, m.Epoch, m.NodeIndex, m.Ranges, m.Active, b.Epoch, b.NodeIndex, b.Ranges)
			}
		}
	})
}
