package coordinator

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/coordinator/leader"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// streamOf is a lease stream of member a of testRing on a node with testTiming, announcing the
// controls feature or not.
func streamOf(controls bool) *leaseStream {
	term := &leaderTerm{shares: newShareBook(newReportStore(lease.ReportPeriod))}
	return &leaseStream{n: &Node{cfg: Config{Timing: testTiming}}, term: term, ring: testRing, member: mid("a"), controls: controls}
}

// What a stream sends, decided on the committed state with the share book's share: to a client
// with the feature a change of the controls is due at once, like a new epoch; to one without it
// nothing is due while the ring is paused whole, renewals included. Every decision carries the
// end of the proof it was decided under.
func TestStreamElementFollowsTheControls(t *testing.T) {
	s := fsm.NewState()
	apply(t, s, join("a"), join("b"))
	planAll(t, s)
	a := s.Ring(testRing).Members[mid("a").Key()]
	withFeature, without := streamOf(true), streamOf(false)
	writeBy := t0.Add(time.Second)

	d, due := withFeature.element(s, 1, t0, leader.Sent{Renew: true}, writeBy)
	if el := d.Element; !due || el.RenewalMs != testTiming.Renewal.Milliseconds() || el.Controls == nil || el.Controls.RatePerS != nil ||
		el.Controls.Paused || el.Controls.PausedImpl == nil || !d.WriteBy.Equal(writeBy) {
		t.Fatalf("first element: %+v (due %v)", d, due)
	}
	last := leader.Sent{Epoch: a.Epoch, Controls: d.Controls}
	if _, due := withFeature.element(s, 1, t0, last, writeBy); due {
		t.Fatalf("nothing changed and no renewal is due, yet an element is")
	}

	apply(t, s, &fsm.Limit{Ring: testRing, PerSecond: 10})
	d, due = withFeature.element(s, 1, t0, last, writeBy)
	if !due || d.Element.Controls.RatePerS == nil || *d.Element.Controls.RatePerS != 5 {
		t.Fatalf("after a limit of 10 on half the ring: %+v (due %v), want at once with 5/s", d.Element.Controls, due)
	}
	last.Controls = d.Controls
	apply(t, s, &fsm.Pause{Ring: testRing, Impl: []string{"payment"}})
	if d, due = withFeature.element(s, 1, t0, last, writeBy); !due || d.Element.Controls.Paused || len(d.Element.Controls.PausedImpl) != 1 {
		t.Fatalf("after an impl pause: %+v (due %v)", d.Element.Controls, due)
	}

	// Without the feature: an impl pause or a limit changes nothing it is sent; a pause of the
	// whole ring withholds even its renewals, until the resume.
	if d, due := without.element(s, 1, t0, leader.Sent{Renew: true, Epoch: a.Epoch}, writeBy); !due || d.Element.Controls != nil {
		t.Fatalf("a renewal without the feature: %+v (due %v), want one without controls", d.Element, due)
	}
	if _, due := without.element(s, 1, t0, leader.Sent{Epoch: a.Epoch}, writeBy); due {
		t.Fatalf("a change of the controls is due to a client that cannot read them")
	}
	apply(t, s, &fsm.Pause{Ring: testRing})
	for _, last := range []leader.Sent{{Renew: true, Epoch: a.Epoch}, {Epoch: a.Epoch - 1}} {
		if _, due := without.element(s, 1, t0, last, writeBy); due {
			t.Fatalf("an element is due to a client without the feature while its ring is paused (%+v)", last)
		}
	}
	if d, due := withFeature.element(s, 1, t0, leader.Sent{Renew: true, Epoch: a.Epoch}, writeBy); !due || !d.Element.Controls.Paused {
		t.Fatalf("a client with the feature is renewed while paused, and told so: %+v (due %v)", d.Element.Controls, due)
	}
	apply(t, s, &fsm.Resume{Ring: testRing})
	if _, due := without.element(s, 1, t0, leader.Sent{Renew: true, Epoch: a.Epoch}, writeBy); !due {
		t.Fatalf("the renewal withheld during the pause is not due after the resume")
	}
}

// stepClock returns each of its times once, in order, then the last one forever.
type stepClock struct{ times []time.Time }

func (c *stepClock) Now() time.Time {
	now := c.times[0]
	if len(c.times) > 1 {
		c.times = c.times[1:]
	}
	return now
}

// The driver reads the clock right before the write and writes only before the decision's
// write-by: an element decided in time is not written once a pause has carried the stream past
// the end of its proof of leadership.
func TestWriteBeforeChecksTheClockAtTheWrite(t *testing.T) {
	d := leader.Send{WriteBy: t0.Add(time.Second)}
	written := 0
	if err := writeBefore(&stepClock{times: []time.Time{t0.Add(time.Second - time.Nanosecond)}}, d, func() { written++ }); err != nil || written != 1 {
		t.Fatalf("in time: err %v, written %d", err, written)
	}
	err := writeBefore(&stepClock{times: []time.Time{t0.Add(time.Second)}}, d, func() { written++ })
	if !errors.Is(err, leader.ErrPastWriteBy) || written != 1 {
		t.Fatalf("at the write-by: err %v, written %d; want ErrPastWriteBy and no write", err, written)
	}
	if want := "lease element past its write-by: its proof of leadership ended at"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
}
