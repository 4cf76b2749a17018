package fsm_test

import (
	"errors"
	"testing"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// A rolling restart from TTL 10 s to TTL 3 s: the longest timing stays the 10 s one while the 3 s
// leaders commit theirs, until one of them, having waited out every 10 s lease, retires it.
func TestLongestTimingOfARollingRestart(t *testing.T) {
	s := fsm.NewState()
	mustApply(t, s, &fsm.CommitTiming{Timing: timing10s})
	if s.Timing.InForce != timing10s || s.Timing.Longest != timing10s {
		t.Fatalf("timing %+v", s.Timing)
	}
	mustApply(t, s, &fsm.CommitTiming{Timing: timing3s})
	if s.Timing.InForce != timing3s || s.Timing.Longest != timing10s {
		t.Fatalf("a shorter timing lowered the longest: %+v", s.Timing)
	}
	// A retirement decided before another leader committed its own timing changes nothing.
	other := fsm.NewLeaseTiming("c3", lease.Timing{TTL: 3 * timing3s.TTL / 3, Renewal: timing3s.Renewal})
	mustApply(t, s, &fsm.RetireTiming{Retire: timing10s, Keep: other})
	if s.Timing.Longest != timing10s {
		t.Fatalf("a stale retirement lowered the longest: %+v", s.Timing)
	}
	mustApply(t, s, &fsm.RetireTiming{Retire: timing10s, Keep: timing3s})
	if s.Timing.InForce != timing3s || s.Timing.Longest != timing3s {
		t.Fatalf("after the retirement: %+v", s.Timing)
	}
	// A longer timing raises it again at once.
	mustApply(t, s, &fsm.CommitTiming{Timing: timing10s})
	if s.Timing.Longest != timing10s {
		t.Fatalf("a longer timing did not raise the longest: %+v", s.Timing)
	}
	if err := s.Apply(&fsm.CommitTiming{Timing: fsm.LeaseTiming{Coordinator: "c9"}}); !errors.Is(err, fsm.ErrMalformed) {
		t.Fatalf("a zero timing: %v", err)
	}
	bad := timing3s
	bad.Renewal = bad.TTL
	if err := s.Apply(&fsm.CommitTiming{Timing: bad}); !errors.Is(err, fsm.ErrMalformed) {
		t.Fatalf("a renewal as long as the TTL: %v", err)
	}
}
