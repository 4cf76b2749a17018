package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/lease/minimal"
	"github.com/retryring/retryring/testkit/benchkit"
)

type options struct {
	sizes   []int
	seqs    int
	changes int
	seed    uint64
	cfg     minimal.Config
}

func main() {
	var o options
	var sizes string
	fs := flag.NewFlagSet("movement", flag.ExitOnError)
	fs.StringVar(&sizes, "n", "3,10,30,100", "ring sizes N, comma-separated")
	fs.IntVar(&o.seqs, "seqs", 40, "generated sequences per N")
	fs.IntVar(&o.changes, "changes", 20, "changes per sequence (joins and leaves alternating)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the generated sequences")
	fs.Float64Var(&o.cfg.Tolerance, "tolerance", 0, "τ of the minimal mode (0: its default)")
	fs.IntVar(&o.cfg.MaxRanges, "k", 0, "k of the minimal mode (0: its default)")
	_ = fs.Parse(os.Args[1:])
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 2 {
			benchkit.Fail(fmt.Errorf("-n: %q is not a ring size of at least 2", s))
		}
		o.sizes = append(o.sizes, n)
	}
	p, err := minimal.NewPlanner(o.cfg)
	if err != nil {
		benchkit.Fail(err)
	}
	m := benchkit.DescribeHost()
	fmt.Printf("command:   %s\n", benchkit.Command())
	fmt.Printf("date:      %s\n", m.When.Format(time.RFC3339))
	fmt.Printf("machine:   %d CPUs (%s), %s RAM, kernel %s, %s\n", m.CPUs, m.CPUModel, m.MemTotal, m.Kernel, m.Go)
	c := p.Config()
	fmt.Printf("minimal:   τ %v, k %d, merge above %d, step budget %d moves, return delay %v\n", c.Tolerance, c.MaxRanges, c.MergeAbove, c.StepMoves, c.ReturnDelay)
	fmt.Printf("sequences: %d per N, %d changes each (joins and leaves alternating), seed %d\n\n", o.seqs, o.changes, o.seed)
	var results []result
	for _, n := range o.sizes {
		results = append(results, measure(p, n, o))
	}
	fmt.Print(render(results))
}

// stat is a mean and a max over observations.
type stat struct {
	sum, max float64
	n        int
}

func (s *stat) add(v float64) { s.sum, s.max, s.n = s.sum+v, max(s.max, v), s.n+1 }
func (s stat) mean() float64 {
	if s.n == 0 {
		return 0
	}
	return s.sum / float64(s.n)
}

// side is what one mode measured at one N.
type side struct {
	join, leave           stat // share of the ring moved
	joinHand, leaveHand   stat // handovers
	idle, idleSteps       stat // minimal only: what the even-out after a change moved, and its steps
	idleMoves, idleHand   stat // minimal only: the even-out's moves, and its handovers (pairs)
	restart               stat // share moved by a rolling restart of every member
	rangesChange          stat // most ranges of one member right after a change
	rangesSettled         stat // most ranges of one member once settled
	rangesMeanAfterChange stat // mean ranges per member right after a change
}

type result struct {
	n                    int
	contiguous, minimalM side
	// busy is the minimal mode on the same sequences with no idle time at all: no even-out ever.
	busy busyStats
}

// busyStats is what the minimal mode does when changes follow each other with no idle time.
type busyStats struct {
	join, leave  stat // share of the ring moved
	outside      stat // 1 for a change after which an active member is outside τ, else 0
	rangesChange stat // most ranges of one member right after a change
	rangesMean   stat // mean ranges per member right after a change
}

// record adds the state after a change of the busy ring.
func (b *busyStats) record(p *minimal.Planner, a minimal.Assignment) {
	most, total, out := 0, 0, 0.0
	n := float64(len(a.Members))
	tau := p.Config().Tolerance
	for _, m := range a.Members {
		most, total = max(most, len(m.Ranges)), total+len(m.Ranges)
		// A float64 share is exact to about 2^-53 of the ring, far inside the bounds' margins.
		if f := m.Ranges.Fraction(); f < (1-tau)/n-1e-12 || f > (1+tau)/n+1e-12 {
			out = 1
		}
	}
	b.outside.add(out)
	b.rangesChange.add(float64(most))
	b.rangesMean.add(float64(total) / n)
}

func measure(p *minimal.Planner, n int, o options) result {
	res := result{n: n}
	for seq := range o.seqs {
		rng := rand.New(rand.NewPCG(o.seed, uint64(n)<<32|uint64(seq)))
		order := make([]string, n)
		for i := range order {
			order[i] = fmt.Sprintf("w%d", i)
		}
		a := settle(p, joinAll(p, order), nil)
		busy := a
		now := time.Unix(0, 0)
		next := n
		for c := range o.changes {
			if c%2 == 0 {
				id := fmt.Sprintf("w%d", next)
				next++
				before := contiguous(order)
				order = append(order, id)
				after := contiguous(order)
				res.contiguous.join.add(movedShare(before, after))
				res.contiguous.joinHand.add(float64(handovers(before, after)))
				b, _, err := p.Join(a, id)
				if err != nil {
					benchkit.Fail(err)
				}
				res.minimalM.join.add(movedShare(a.Owners(), b.Owners()))
				res.minimalM.joinHand.add(float64(handovers(a.Owners(), b.Owners())))
				a = b
				if b, _, err = p.Join(busy, id); err != nil {
					benchkit.Fail(err)
				}
				res.busy.join.add(movedShare(busy.Owners(), b.Owners()))
				busy = b
			} else {
				id := order[rng.IntN(len(order))]
				before := contiguous(order)
				order = slices.DeleteFunc(order, func(s string) bool { return s == id })
				after := contiguous(order)
				res.contiguous.leave.add(movedShare(before, after))
				res.contiguous.leaveHand.add(float64(handovers(before, after)))
				leftAt := now
				left, _, err := p.Leave(a, id, leftAt)
				if err != nil {
					benchkit.Fail(err)
				}
				now = now.Add(p.Config().ReturnDelay)
				b, _ := p.Expire(left, now)
				res.minimalM.leave.add(movedShare(a.Owners(), b.Owners()))
				res.minimalM.leaveHand.add(float64(handovers(a.Owners(), b.Owners())))
				a = b
				if left, _, err = p.Leave(busy, id, leftAt); err != nil {
					benchkit.Fail(err)
				}
				b, _ = p.Expire(left, now)
				res.busy.leave.add(movedShare(busy.Owners(), b.Owners()))
				busy = b
			}
			res.busy.record(p, busy)
			most, total := 0, 0
			for _, m := range a.Members {
				most, total = max(most, len(m.Ranges)), total+len(m.Ranges)
			}
			res.minimalM.rangesChange.add(float64(most))
			res.minimalM.rangesMeanAfterChange.add(float64(total) / float64(len(a.Members)))
			res.contiguous.rangesChange.add(1)
			res.contiguous.rangesMeanAfterChange.add(1)
			a = settle(p, a, &res.minimalM)
			most = 0
			for _, m := range a.Members {
				most = max(most, len(m.Ranges))
			}
			res.minimalM.rangesSettled.add(float64(most))
			res.contiguous.rangesSettled.add(1)
		}
		res.contiguous.restart.add(restartContiguous(order))
		res.minimalM.restart.add(restartMinimal(p, a, now))
	}
	return res
}

func joinAll(p *minimal.Planner, ids []string) minimal.Assignment {
	var a minimal.Assignment
	for _, id := range ids {
		var err error
		if a, _, err = p.Join(a, id); err != nil {
			benchkit.Fail(err)
		}
	}
	return a
}

// settle runs even-out steps until the ring is settled, adding what they moved to s (if set).
func settle(p *minimal.Planner, a minimal.Assignment, s *side) minimal.Assignment {
	start := a.Owners()
	steps, count := 0, 0
	for ; ; steps++ {
		b, moves := p.EvenOut(a)
		if len(moves) == 0 {
			break
		}
		a, count = b, count+len(moves)
		if steps > 100000 {
			benchkit.Fail(fmt.Errorf("%d members not settled after %d even-out steps", len(a.Members), steps))
		}
	}
	if s != nil {
		s.idle.add(movedShare(start, a.Owners()))
		s.idleSteps.add(float64(steps))
		s.idleMoves.add(float64(count))
		s.idleHand.add(float64(handovers(start, a.Owners())))
	}
	return a
}

// contiguous is today's assignment: the equal split among the members in join order.
func contiguous(order []string) map[string]lease.Ranges {
	out := map[string]lease.Ranges{}
	for i, r := range lease.Split(len(order)) {
		out[order[i]] = lease.Ranges{r}
	}
	return out
}

// restartContiguous is the share of the ring a rolling restart moves under the contiguous split:
// each member in turn leaves and its new incarnation joins at the last place, one after another.
func restartContiguous(order []string) float64 {
	cur := slices.Clone(order)
	total := 0.0
	for _, id := range order {
		before := contiguous(cur)
		cur = append(slices.DeleteFunc(cur, func(s string) bool { return s == id }), id)
		total += movedShare(before, contiguous(cur)) // the leave and the join, as one pass may plan them
	}
	return total
}

// restartMinimal is the same under the minimal mode: each member leaves and comes back within
// the return delay.
func restartMinimal(p *minimal.Planner, a minimal.Assignment, now time.Time) float64 {
	start := a.Owners()
	for _, m := range slices.Clone(a.Members) {
		var err error
		if a, _, err = p.Leave(a, m.ID, now); err != nil {
			benchkit.Fail(err)
		}
		now = now.Add(p.Config().ReturnDelay / 2)
		a, _ = p.Expire(a, now)
		if a, _, err = p.Join(a, m.ID); err != nil {
			benchkit.Fail(err)
		}
	}
	return movedShare(start, a.Owners())
}

// movedShare is the share of the ring whose owner differs between before and after.
func movedShare(before, after map[string]lease.Ranges) float64 {
	total := 0.0
	for id, rs := range before {
		total += rs.Subtract(after[id]).Fraction()
	}
	return total
}

// handovers counts the pairs of distinct members (from, to) between which tokens moved.
func handovers(before, after map[string]lease.Ranges) int {
	count := 0
	for from, b := range before {
		for to, c := range after {
			if from != to && b.Overlaps(c) {
				count++
			}
		}
	}
	return count
}

func render(results []result) string {
	var b strings.Builder
	pct := func(v float64) string { return fmt.Sprintf("%.1f %%", 100*v) }
	fmt.Fprintln(&b, "Share of the ring moved per change (mean / max over the sequences), and handovers (mean)")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "| N | mode | join: moved | join: handovers | 1/(N+1) | leave: moved | leave: handovers | idle even-out after a change: moved | its steps (mean / max) | its moves | its handovers | rolling restart of all N: moved, summed over the N restarts |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		for _, row := range []struct {
			name string
			s    side
		}{{"contiguous", r.contiguous}, {"minimal", r.minimalM}} {
			idle := "— | — | — | —"
			if row.name == "minimal" {
				idle = fmt.Sprintf("%s / %s | %.1f / %.0f | %.1f | %.1f", pct(row.s.idle.mean()), pct(row.s.idle.max),
					row.s.idleSteps.mean(), row.s.idleSteps.max, row.s.idleMoves.mean(), row.s.idleHand.mean())
			}
			fmt.Fprintf(&b, "| %d | %s | %s / %s | %.1f | %s | %s / %s | %.1f | %s | %s / %s |\n", r.n, row.name,
				pct(row.s.join.mean()), pct(row.s.join.max), row.s.joinHand.mean(), pct(1/float64(r.n+1)),
				pct(row.s.leave.mean()), pct(row.s.leave.max), row.s.leaveHand.mean(), idle,
				pct(row.s.restart.mean()), pct(row.s.restart.max))
		}
	}
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "Ranges per member, minimal mode (contiguous: always 1)")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "| N | right after a change: mean per member | right after a change: most of one member (mean / max) | settled: most of one member (max) |")
	fmt.Fprintln(&b, "|---|---|---|---|")
	for _, r := range results {
		s := r.minimalM
		fmt.Fprintf(&b, "| %d | %.2f | %.1f / %.0f | %.0f |\n", r.n, s.rangesMeanAfterChange.mean(), s.rangesChange.mean(), s.rangesChange.max, s.rangesSettled.max)
	}
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "Minimal mode with no idle time: the same changes back to back, no even-out ever")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "| N | join: moved (mean / max) | leave: moved (mean / max) | changes leaving a member outside τ | ranges per member after a change: mean | most of one member (mean / max) |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|")
	for _, r := range results {
		s := r.busy
		fmt.Fprintf(&b, "| %d | %s / %s | %s / %s | %s | %.2f | %.1f / %.0f |\n", r.n,
			pct(s.join.mean()), pct(s.join.max), pct(s.leave.mean()), pct(s.leave.max),
			pct(s.outside.mean()), s.rangesMean.mean(), s.rangesChange.mean(), s.rangesChange.max)
	}
	return b.String()
}
