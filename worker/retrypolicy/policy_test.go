package retrypolicy

import (
	"testing"
	"time"
)

func TestClassifyBuiltIn(t *testing.T) {
	cases := []struct {
		statuses []int
		want     OutcomeKind
	}{
		{[]int{200, 201, 202, 204, 299, 409}, Done},
		{[]int{500, 502, 503, 504, 599, 408, 425, 429}, Transient},
		{[]int{400, 401, 403, 404, 410, 422, 499}, Permanent},
		// No answer, an informational answer, a redirect not followed: the budget decides.
		{[]int{0, 100, 101, 301, 304, 399}, Transient},
	}
	p := Default()
	for _, c := range cases {
		for _, s := range c.statuses {
			if got := p.Classify(s); got != c.want {
				t.Errorf("Classify(%d) = %v, want %v", s, got, c.want)
			}
		}
	}
}

func TestClassifyOverrides(t *testing.T) {
	p := Default()
	p.Statuses = map[int]OutcomeKind{409: Transient, 404: Done, 503: Permanent, 302: Permanent}
	cases := map[int]OutcomeKind{
		409: Transient, 404: Done, 503: Permanent, 302: Permanent,
		// Statuses without an override keep the built-in rule.
		200: Done, 500: Transient, 400: Permanent, 301: Transient,
	}
	for s, want := range cases {
		if got := p.Classify(s); got != want {
			t.Errorf("Classify(%d) = %v, want %v", s, got, want)
		}
	}
}

func TestSetFor(t *testing.T) {
	var zero Set
	if got := zero.For("Payment"); got.MaxAttempts != DefaultMaxAttempts || got.MaxDelay != DefaultMaxDelay {
		t.Errorf("zero Set: For = %+v, want the built-in policy", got)
	}
	s := Set{
		Default: Policy{MaxAttempts: 3, MaxDelay: time.Minute},
		Steps:   map[string]Policy{"Payment": {MaxAttempts: 7, MaxDelay: time.Hour}},
	}
	if got := s.For("Payment"); got.MaxAttempts != 7 {
		t.Errorf("For(Payment) = %+v, want its own policy", got)
	}
	if got := s.For("Inventory"); got.MaxAttempts != 3 || got.MaxDelay != time.Minute {
		t.Errorf("For(Inventory) = %+v, want the set's default", got)
	}
}

func TestOutcomeKindString(t *testing.T) {
	// The worker's metric labels and reports print these: they must not change.
	for k, want := range map[OutcomeKind]string{Done: "done", Transient: "transient", Permanent: "permanent", NotSent: "not_sent", 0: "outcome(0)", 9: "outcome(9)"} {
		if k.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(k), k.String(), want)
		}
	}
}

// TestClassifyOverrideOutsideTheThreeIsTransient: a Statuses map built by hand may hold a kind no
// status can mean (none, NotSent, an unknown value); the answer then counts as transient, as the
// HTTP executor counted it before the policy and the worker shared one kind.
func TestClassifyOverrideOutsideTheThreeIsTransient(t *testing.T) {
	p := Default()
	p.Statuses = map[int]OutcomeKind{404: 0, 500: NotSent, 400: 9, 409: Permanent}
	cases := map[int]OutcomeKind{404: Transient, 500: Transient, 400: Transient, 409: Permanent}
	for s, want := range cases {
		if got := p.Classify(s); got != want {
			t.Errorf("Classify(%d) with override %v = %v, want %v", s, p.Statuses[s], got, want)
		}
	}
}
