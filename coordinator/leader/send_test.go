package leader

import (
	"errors"
	"testing"
	"time"

	"github.com/retryring/retryring/fsm"
)

// WireControls carries the share it is given under a limit, and no rate without one.
func TestWireControlsShares(t *testing.T) {
	limited := &fsm.Controls{RatePerS: 60, PausedImpl: []string{"email"}}
	if c := WireControls(limited, Share{Limited: true}); c.RatePerS == nil || *c.RatePerS != 0 || c.PausedImpl[0] != "email" {
		t.Fatalf("a member without a share: %+v", c)
	}
	if c := WireControls(limited, Share{PerSecond: 60, Limited: true}); *c.RatePerS != 60 {
		t.Fatalf("the whole limit: %+v", c)
	}
	if c := WireControls(nil, Share{}); c.RatePerS != nil || c.Paused || c.PausedImpl == nil {
		t.Fatalf("no controls: %+v", c)
	}
}

// An element is due to an active, assigned member only, on a renewal or a new epoch; the
// decision carries the end of the proof it was decided under, and Check refuses a write at or
// after it, saying when the proof ended and how late the write is.
func TestElementCarriesItsWriteBy(t *testing.T) {
	s := fsm.NewState()
	apply(t, s, join("a"))
	stream := Stream{Member: mid("a"), Ring: testRing, TTL: testTiming.TTL, Renewal: testTiming.Renewal}
	until := t0.Add(250 * time.Millisecond)
	if _, due := Element(s.Ring(testRing), stream, Share{}, Sent{Renew: true}, t0, until); due {
		t.Fatal("an element is due to a member with no assignment yet")
	}
	if _, due := Element(nil, stream, Share{}, Sent{Renew: true}, t0, until); due {
		t.Fatal("an element is due on a ring that is not in the state")
	}
	planAll(t, s)
	a := s.Ring(testRing).Members[mid("a").Key()]
	d, due := Element(s.Ring(testRing), stream, Share{}, Sent{}, t0, until)
	if !due || d.Element.Epoch != a.Epoch || d.Element.TTLMs != testTiming.TTL.Milliseconds() || d.Element.IssuedAtMs != t0.UnixMilli() ||
		d.Controls != "" || !d.WriteBy.Equal(until) {
		t.Fatalf("the first element of epoch %d: %+v (due %v)", a.Epoch, d, due)
	}
	if _, due := Element(s.Ring(testRing), stream, Share{}, Sent{Epoch: a.Epoch}, t0, until); due {
		t.Fatal("an element is due with no renewal and no new epoch")
	}
	if err := d.Check(until.Add(-time.Nanosecond)); err != nil {
		t.Fatalf("before the write-by: %v", err)
	}
	err := d.Check(until.Add(3 * time.Millisecond))
	if !errors.Is(err, ErrPastWriteBy) {
		t.Fatalf("after the write-by: %v, want ErrPastWriteBy", err)
	}
	want := "leader: lease element past its write-by: its proof of leadership ended at 2026-01-02T03:04:05.25Z, 3ms before the write; it waits for the next proof"
	if err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	if err := (Send{}).Check(t0); !errors.Is(err, ErrPastWriteBy) {
		t.Fatalf("a decision of a term that may not send (zero write-by) is written: %v", err)
	}
}
