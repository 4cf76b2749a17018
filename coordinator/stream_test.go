package coordinator

import (
	"testing"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// streamOf is a lease stream of member a of testRing on a node with testTiming, announcing the
// controls feature or not.
func streamOf(controls bool) *leaseStream {
	term := &leaderTerm{shares: newShareBook(newReportStore(lease.ReportPeriod))}
	return &leaseStream{n: &Node{cfg: Config{Timing: testTiming}}, term: term, ring: testRing, member: mid("a"), controls: controls}
}

// What a stream sends, decided on the committed state: to a client with the feature a change of
// the controls is due at once, like a new epoch; to one without it nothing is due while the ring
// is paused whole, renewals included.
func TestStreamElementFollowsTheControls(t *testing.T) {
	s := fsm.NewState()
	apply(t, s, join("a"), join("b"))
	planAll(t, s)
	a := s.Ring(testRing).Members[mid("a").Key()]
	withFeature, without := streamOf(true), streamOf(false)

	el, controls, due := withFeature.element(s, 1, t0, sent{renew: true})
	if !due || el.RenewalMs != testTiming.Renewal.Milliseconds() || el.Controls == nil || el.Controls.RatePerS != nil ||
		el.Controls.Paused || el.Controls.PausedImpl == nil {
		t.Fatalf("first element: %+v (due %v)", el, due)
	}
	last := sent{epoch: a.Epoch, controls: controls}
	if _, _, due := withFeature.element(s, 1, t0, last); due {
		t.Fatalf("nothing changed and no renewal is due, yet an element is")
	}

	apply(t, s, &fsm.Limit{Ring: testRing, PerSecond: 10})
	el, controls, due = withFeature.element(s, 1, t0, last)
	if !due || el.Controls.RatePerS == nil || *el.Controls.RatePerS != 5 {
		t.Fatalf("after a limit of 10 on half the ring: %+v (due %v), want at once with 5/s", el.Controls, due)
	}
	last.controls = controls
	apply(t, s, &fsm.Pause{Ring: testRing, Impl: []string{"payment"}})
	if el, _, due = withFeature.element(s, 1, t0, last); !due || el.Controls.Paused || len(el.Controls.PausedImpl) != 1 {
		t.Fatalf("after an impl pause: %+v (due %v)", el.Controls, due)
	}

	// Without the feature: an impl pause or a limit changes nothing it is sent; a pause of the
	// whole ring withholds even its renewals, until the resume.
	if el, _, due := without.element(s, 1, t0, sent{renew: true, epoch: a.Epoch}); !due || el.Controls != nil {
		t.Fatalf("a renewal without the feature: %+v (due %v), want one without controls", el, due)
	}
	if _, _, due := without.element(s, 1, t0, sent{epoch: a.Epoch}); due {
		t.Fatalf("a change of the controls is due to a client that cannot read them")
	}
	apply(t, s, &fsm.Pause{Ring: testRing})
	for _, last := range []sent{{renew: true, epoch: a.Epoch}, {epoch: a.Epoch - 1}} {
		if _, _, due := without.element(s, 1, t0, last); due {
			t.Fatalf("an element is due to a client without the feature while its ring is paused (%+v)", last)
		}
	}
	if el, _, due := withFeature.element(s, 1, t0, sent{renew: true, epoch: a.Epoch}); !due || !el.Controls.Paused {
		t.Fatalf("a client with the feature is renewed while paused, and told so: %+v (due %v)", el.Controls, due)
	}
	apply(t, s, &fsm.Resume{Ring: testRing})
	if _, _, due := without.element(s, 1, t0, sent{renew: true, epoch: a.Epoch}); !due {
		t.Fatalf("the renewal withheld during the pause is not due after the resume")
	}
}

// wireControls carries the share it is given under a limit, and no rate without one.
func TestWireControlsShares(t *testing.T) {
	limited := &fsm.Controls{RatePerS: 60, PausedImpl: []string{"email"}}
	if c := wireControls(limited, 0, true); c.RatePerS == nil || *c.RatePerS != 0 || c.PausedImpl[0] != "email" {
		t.Fatalf("a member without a share: %+v", c)
	}
	if c := wireControls(limited, 60, true); *c.RatePerS != 60 {
		t.Fatalf("the whole limit: %+v", c)
	}
	if c := wireControls(nil, 0, false); c.RatePerS != nil || c.Paused || c.PausedImpl == nil {
		t.Fatalf("no controls: %+v", c)
	}
}
