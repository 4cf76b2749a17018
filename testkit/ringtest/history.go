package ringtest

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/retryring/retryring/lease"
)

// Interval is one lease element as a worker held it: from From (inclusive) to To (exclusive) the
// worker's guard would let it use Ranges, and the Node-0 role when Node0 is set. Instants are
// offsets on one monotonic clock shared by every worker of the history.
//
// From is when the element was installed. To is the earliest of: its expiry (ValidFrom + TTL), the
// install of the worker's next element (whose ranges take over from then on), and the moment the
// worker stopped (leave, crash).
type Interval struct {
	Worker      string
	Incarnation string
	Epoch       uint64
	NodeIndex   int
	NodeCount   int
	From, To    time.Duration
	Ranges      lease.Ranges
	Node0       bool
}

// Holder names the process that held the interval. Two incarnations of one worker id are two
// holders: they must never hold a token at the same instant either.
func (iv Interval) Holder() string { return holderName(iv.Worker, iv.Incarnation) }

func holderName(worker, incarnation string) string {
	if incarnation == "" {
		return worker
	}
	return worker + "#" + incarnation
}

func (iv Interval) empty() bool { return iv.To <= iv.From }

// String renders the interval for failure messages.
func (iv Interval) String() string {
	n0 := ""
	if iv.Node0 {
		n0 = " node0"
	}
	return fmt.Sprintf("%s epoch %d [%v, %v) %v%s", iv.Holder(), iv.Epoch, iv.From, iv.To, iv.Ranges, n0)
}

// Window is a span [From, To) during which the ring is expected to be settled: no membership change,
// no fault, every token usable by some worker.
type Window struct {
	From, To time.Duration
}

// History is the input of Check: the intervals of every worker, and the windows in which coverage
// is required.
type History struct {
	Intervals []Interval
	Settled   []Window
}

// ViolationKind names the property a violation breaks.
type ViolationKind int

// Kinds of violations.
const (
	// Overlap: a token was usable by two holders at the same instant (invariant 2).
	Overlap ViolationKind = iota + 1
	// TwoNode0: two holders were Node-0 at the same instant (invariant 3).
	TwoNode0
	// Gap: inside a settled window, some tokens were usable by nobody (invariant 1).
	Gap
	// TwoIncarnations: two processes with one worker id both held something at the same instant,
	// even disjoint ranges (the wire protocol's incarnation rule).
	TwoIncarnations
)

// String names the kind.
func (k ViolationKind) String() string {
	switch k {
	case Overlap:
		return "overlap"
	case TwoNode0:
		return "two Node-0s"
	case Gap:
		return "gap"
	case TwoIncarnations:
		return "two incarnations"
	}
	return fmt.Sprintf("violation(%d)", int(k))
}

// Violation is one broken property, with the instant it was first seen.
type Violation struct {
	Kind ViolationKind
	// At is the first instant of the violation.
	At time.Duration
	// Holders are the two holders involved (Overlap, TwoNode0).
	Holders []string
	// Ranges are the tokens held twice (Overlap) or held by nobody (Gap).
	Ranges lease.Ranges
	// Intervals are the intervals involved (Overlap, TwoNode0).
	Intervals []Interval
}

// String says what broke, where and when.
func (v Violation) String() string {
	switch v.Kind {
	case Gap:
		return fmt.Sprintf("%v at %v: tokens %v usable by nobody", v.Kind, v.At, v.Ranges)
	case Overlap:
		return fmt.Sprintf("%v at %v: tokens %v usable by both %s", v.Kind, v.At, v.Ranges, strings.Join(v.Holders, " and "))
	default:
		return fmt.Sprintf("%v at %v: %s", v.Kind, v.At, strings.Join(v.Holders, " and "))
	}
}

// Check runs every check on h: exclusivity, a single Node-0 and a single incarnation per worker id
// at every instant, and coverage in every settled window.
func Check(h History) []Violation {
	var out []Violation
	out = append(out, CheckExclusive(h.Intervals)...)
	out = append(out, CheckNode0(h.Intervals)...)
	out = append(out, CheckIncarnations(h.Intervals)...)
	out = append(out, CheckCoverage(h.Intervals, h.Settled)...)
	return out
}

// CheckExclusive reports every pair of intervals of different holders that share a token at some
// instant. Intervals are half-open, so one ending at t and another starting at t do not meet.
func CheckExclusive(ivs []Interval) []Violation {
	return sweepPairs(ivs, func(a, b Interval) (Violation, bool) {
		shared := a.Ranges.Intersect(b.Ranges)
		if shared.Empty() {
			return Violation{}, false
		}
		return Violation{Kind: Overlap, Ranges: shared}, true
	})
}

// CheckNode0 reports every pair of intervals of different holders that are both Node-0 at some
// instant.
func CheckNode0(ivs []Interval) []Violation {
	return sweepPairs(ivs, func(a, b Interval) (Violation, bool) {
		if !a.Node0 || !b.Node0 {
			return Violation{}, false
		}
		return Violation{Kind: TwoNode0}, true
	})
}

// CheckIncarnations reports every pair of intervals of two incarnations of one worker id that both
// hold something (a range or Node-0) at some instant.
func CheckIncarnations(ivs []Interval) []Violation {
	return sweepPairs(ivs, func(a, b Interval) (Violation, bool) {
		if a.Worker != b.Worker || !a.holds() || !b.holds() {
			return Violation{}, false
		}
		return Violation{Kind: TwoIncarnations, Ranges: a.Ranges.Union(b.Ranges)}, true
	})
}

func (iv Interval) holds() bool { return !iv.Ranges.Empty() || iv.Node0 }

// sweepPairs calls conflict for every pair of intervals of different holders that are live at the
// same instant. Two half-open intervals meet exactly when the later-starting one starts before the
// other ends, so it is enough to look, at each interval's start, at the intervals still live then.
func sweepPairs(ivs []Interval, conflict func(a, b Interval) (Violation, bool)) []Violation {
	sorted := nonEmptyByStart(ivs)
	var out []Violation
	var live []Interval
	for _, b := range sorted {
		kept := live[:0]
		for _, a := range live {
			if a.To > b.From {
				kept = append(kept, a)
			}
		}
		live = kept
		for _, a := range live {
			if a.Holder() == b.Holder() {
				continue
			}
			if v, ok := conflict(a, b); ok {
				v.At = b.From
				v.Holders = []string{a.Holder(), b.Holder()}
				v.Intervals = []Interval{a, b}
				out = append(out, v)
			}
		}
		live = append(live, b)
	}
	return out
}

func nonEmptyByStart(ivs []Interval) []Interval {
	out := make([]Interval, 0, len(ivs))
	for _, iv := range ivs {
		if !iv.empty() {
			out = append(out, iv)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].From < out[j].From })
	return out
}

// CheckCoverage reports, for each settled window, every stretch of time in it during which the union
// of usable ranges is not the whole ring, once per distinct set of missing tokens.
func CheckCoverage(ivs []Interval, windows []Window) []Violation {
	var out []Violation
	for _, w := range windows {
		out = append(out, coverageIn(ivs, w)...)
	}
	return out
}

func coverageIn(ivs []Interval, w Window) []Violation {
	var in []Interval
	for _, iv := range ivs {
		if !iv.empty() && iv.From < w.To && iv.To > w.From {
			in = append(in, iv)
		}
	}
	var out []Violation
	var lastMissing lease.Ranges
	for _, p := range changePoints(in, w.From, w.To) {
		missing := lease.Ranges{lease.FullRing}.Subtract(UsableAt(in, p, nil))
		if !missing.Empty() && !missing.Equal(lastMissing) {
			out = append(out, Violation{Kind: Gap, At: p, Ranges: missing})
		}
		lastMissing = missing
	}
	return out
}

// FormatViolations renders violations one per line for a test failure, at most limit of them.
func FormatViolations(vs []Violation, limit int) string {
	var b strings.Builder
	for i, v := range vs {
		if i == limit {
			fmt.Fprintf(&b, "\n\t... and %d more", len(vs)-limit)
			break
		}
		fmt.Fprintf(&b, "\n\t%v", v)
	}
	return b.String()
}
