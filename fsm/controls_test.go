package fsm_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

func controlsOf(s *fsm.State, k lease.RingKey) *fsm.Controls {
	if r := s.Ring(k); r != nil {
		return r.Controls
	}
	return nil
}

// A pause may name a ring no worker joined yet; the ring exists from then on with its controls,
// and is forgotten again when they are cleared, since nobody ever joined it.
func TestPauseOfARingNobodyJoined(t *testing.T) {
	s := fsm.NewState()
	mustApply(t, s, &fsm.Pause{Ring: ringA, Reason: "before the first deploy", AtMs: 5})
	c := controlsOf(s, ringA)
	if c == nil || !c.Paused || c.Reason != "before the first deploy" || c.SinceMs != 5 {
		t.Fatalf("controls %+v", c)
	}
	mustApply(t, s, &fsm.Join{Ring: ringA, WorkerID: "A", Incarnation: "a1"})
	if c := controlsOf(s, ringA); c == nil || !c.Paused {
		t.Fatalf("a join dropped the pause: %+v", c)
	}
	mustApply(t, s, &fsm.Pause{Ring: ringB, AtMs: 6})
	mustApply(t, s, &fsm.Resume{Ring: ringB, AtMs: 7})
	if s.Ring(ringB) != nil {
		t.Fatalf("a resumed ring nobody joined is still in the state: %+v", s.Ring(ringB))
	}
	// A ring that had members keeps its epochs when its controls are cleared.
	mustApply(t, s, &fsm.Resume{Ring: ringA, AtMs: 8})
	if r := s.Ring(ringA); r == nil || r.Controls != nil || r.Members[fsm.MemberKey("A", "a1")] == nil {
		t.Fatalf("ring after resume: %+v", r)
	}
	// Resuming or clearing what was never set changes nothing and creates nothing.
	mustApply(t, s, &fsm.Resume{Ring: ringB, AtMs: 9})
	mustApply(t, s, &fsm.Limit{Ring: ringB, Clear: true, AtMs: 9})
	if s.Ring(ringB) != nil {
		t.Fatalf("a resume created a ring")
	}
}

func TestPauseAndResumeOfImplTypes(t *testing.T) {
	s := fsm.NewState()
	mustApply(t, s, &fsm.Pause{Ring: ringA, Impl: []string{"shipping", "payment"}, AtMs: 1})
	mustApply(t, s, &fsm.Pause{Ring: ringA, Impl: []string{"payment", "email"}, Reason: "email provider down", AtMs: 2})
	c := controlsOf(s, ringA)
	if c.Paused || !slices.Equal(c.PausedImpl, []string{"email", "payment", "shipping"}) || c.Reason != "email provider down" {
		t.Fatalf("controls %+v", c)
	}
	// A whole-ring pause stays when some impl types resume; a resume of everything clears all.
	// A pause without a reason keeps the one given before.
	mustApply(t, s, &fsm.Pause{Ring: ringA, AtMs: 3})
	if c := controlsOf(s, ringA); c.Reason != "email provider down" {
		t.Fatalf("a pause without a reason dropped the last one: %+v", c)
	}
	mustApply(t, s, &fsm.Resume{Ring: ringA, Impl: []string{"email", "payment"}, AtMs: 4})
	c = controlsOf(s, ringA)
	if !c.Paused || !slices.Equal(c.PausedImpl, []string{"shipping"}) || c.SinceMs != 4 {
		t.Fatalf("controls %+v", c)
	}
	mustApply(t, s, &fsm.Limit{Ring: ringA, PerSecond: 40, AtMs: 5})
	mustApply(t, s, &fsm.Resume{Ring: ringA, AtMs: 6})
	c = controlsOf(s, ringA)
	if c == nil || c.Paused || c.PausedImpl != nil || c.Reason != "" || c.RatePerS != 40 {
		t.Fatalf("a resume must keep the limit and drop the pauses: %+v", c)
	}
	// SinceMs moves only when something changed.
	mustApply(t, s, &fsm.Limit{Ring: ringA, PerSecond: 40, AtMs: 99})
	if c := controlsOf(s, ringA); c.SinceMs != 6 {
		t.Fatalf("an unchanged limit moved since to %d", c.SinceMs)
	}
	mustApply(t, s, &fsm.Limit{Ring: ringA, Clear: true, AtMs: 7})
	if r := s.Ring(ringA); r != nil {
		t.Fatalf("nobody joined the ring, and nothing is paused or limited: %+v", r)
	}
}

// Nothing an operator sends grows the state without bound, and bad input changes nothing.
func TestControlsAreBounded(t *testing.T) {
	many := func(n int, prefix string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = prefix + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26))
		}
		return out
	}
	s := fsm.NewState()
	mustApply(t, s, &fsm.Pause{Ring: ringA, Impl: many(fsm.MaxPausedImpls-1, "a"), AtMs: 1})
	before := stateJSON(t, s)
	for name, c := range map[string]fsm.Command{
		"65 impl types in all":  &fsm.Pause{Ring: ringA, Impl: []string{"one-more", "and-another"}},
		"65 impl types at once": &fsm.Pause{Ring: ringB, Impl: many(fsm.MaxPausedImpls+1, "b")},
		"empty impl":            &fsm.Pause{Ring: ringA, Impl: []string{""}},
		"long impl":             &fsm.Pause{Ring: ringA, Impl: []string{strings.Repeat("i", fsm.MaxImplBytes+1)}},
		"long reason":           &fsm.Pause{Ring: ringA, Reason: strings.Repeat("r", fsm.MaxReasonBytes+1)},
		"no ring":               &fsm.Pause{},
		"zero rate":             &fsm.Limit{Ring: ringA},
		"negative rate":         &fsm.Limit{Ring: ringA, PerSecond: -1},
		"NaN":                   &fsm.Limit{Ring: ringA, PerSecond: math.NaN()},
		"infinite":              &fsm.Limit{Ring: ringA, PerSecond: math.Inf(1)},
		"rate and clear":        &fsm.Limit{Ring: ringA, PerSecond: 3, Clear: true},
		"resume of empty impl":  &fsm.Resume{Ring: ringA, Impl: []string{""}},
	} {
		if err := s.Apply(c); !errors.Is(err, fsm.ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
		if stateJSON(t, s) != before {
			t.Fatalf("%s: refused, but the state changed", name)
		}
	}
	mustApply(t, s, &fsm.Pause{Ring: ringA, Impl: []string{"the-64th"}})
}
