package fsm_test

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// failer is what the helpers need from *testing.T and *rapid.T alike.
type failer interface {
	Helper()
	Fatalf(format string, args ...any)
}

var (
	ringA = lease.RingKey{Region: "eu", Cluster: "c1", Service: "orders"}
	ringB = lease.RingKey{Region: "us", Cluster: "c2", Service: "payments"}
	// timing10s and timing3s are the timings of a rolling restart onto a shorter TTL.
	timing10s = fsm.NewLeaseTiming("c1", lease.Timing{TTL: 10 * time.Second, Renewal: 2 * time.Second})
	timing3s  = fsm.NewLeaseTiming("c2", lease.Timing{TTL: 3 * time.Second, Renewal: time.Second})
)

// stateJSON is the canonical form of a state: the snapshot encoding (encoding/json sorts map keys).
func stateJSON(tb failer, s *fsm.State) string {
	tb.Helper()
	var buf bytes.Buffer
	if err := fsm.WriteSnapshot(&buf, s); err != nil {
		tb.Fatalf("write snapshot: %v", err)
	}
	return buf.String()
}

func mustApply(tb failer, s *fsm.State, c fsm.Command) {
	tb.Helper()
	if err := s.Apply(c); err != nil {
		tb.Fatalf("apply %T %+v: %v", c, c, err)
	}
}

func member(s *fsm.State, k lease.RingKey, workerID, incarnation string) *fsm.Member {
	r := s.Ring(k)
	if r == nil {
		return nil
	}
	return r.Members[fsm.MemberKey(workerID, incarnation)]
}

func mustMember(tb failer, s *fsm.State, k lease.RingKey, workerID, incarnation string) *fsm.Member {
	tb.Helper()
	m := member(s, k, workerID, incarnation)
	if m == nil {
		tb.Fatalf("no member %s/%s in ring %s", workerID, incarnation, k)
	}
	return m
}

// planAndAssign plans the ring and applies the plan, which must be accepted. It returns the plan
// (nil when nothing changes).
func planAndAssign(tb failer, s *fsm.State, k lease.RingKey) *fsm.Assign {
	tb.Helper()
	a := fsm.Plan(s.Ring(k))
	if a == nil {
		return nil
	}
	if err := s.Apply(a); err != nil {
		tb.Fatalf("a plan made on the current state was refused: %v\nplan: %+v", err, a.Assignments)
	}
	return a
}

// ownedRange is one range of a member's held set, named for error messages.
type ownedRange struct {
	owner string
	r     lease.Range
}

// checkDisjoint fails when two owners share a token or a range is malformed (Start > End). It sorts
// all ranges by start instead of relying on Ranges.Intersect, so that it also sees ranges that
// Intersect would skip.
func checkDisjoint(sets map[string]lease.Ranges) error {
	var all []ownedRange
	for owner, rs := range sets {
		for _, r := range rs {
			if r.Start > r.End {
				return fmt.Errorf("%s holds a malformed range %v", owner, r)
			}
			all = append(all, ownedRange{owner, r})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].r.Start < all[j].r.Start })
	for i := 1; i < len(all); i++ {
		if all[i].r.Start <= all[i-1].r.End {
			return fmt.Errorf("token %d held by %s %v and %s %v", all[i].r.Start, all[i-1].owner, all[i-1].r, all[i].owner, all[i].r)
		}
	}
	return nil
}

// checkRingSafety checks what the state itself promises in every ring, whatever was applied:
// no token held by two members, at most one member that may be Node-0, at most one active
// incarnation per worker id, and never two incarnations of one worker id both holding something.
func checkRingSafety(r *fsm.Ring) error {
	held := map[string]lease.Ranges{}
	var node0 []string
	active := map[string]string{}
	holding := map[string]string{}
	for _, m := range r.SortedMembers() {
		name := m.WorkerID + "/" + m.Incarnation
		held[name] = m.Held()
		if m.HoldsNode0() {
			node0 = append(node0, name)
		}
		if m.Active {
			if other, ok := active[m.WorkerID]; ok {
				return fmt.Errorf("ring %s: two active incarnations of %s: %s and %s", r.Key, m.WorkerID, other, name)
			}
			active[m.WorkerID] = name
		}
		if m.Holding() {
			if other, ok := holding[m.WorkerID]; ok {
				return fmt.Errorf("ring %s: two incarnations of %s hold something: %s and %s", r.Key, m.WorkerID, other, name)
			}
			holding[m.WorkerID] = name
		}
	}
	if err := checkDisjoint(held); err != nil {
		return fmt.Errorf("ring %s: %w", r.Key, err)
	}
	if len(node0) > 1 {
		return fmt.Errorf("ring %s: %d members may be Node-0: %v", r.Key, len(node0), node0)
	}
	return nil
}

func checkStateSafety(s *fsm.State) error {
	for _, r := range s.Rings {
		if err := checkRingSafety(r); err != nil {
			return err
		}
	}
	return nil
}

// checkSettledCoverage checks invariant 1 on a settled ring: the eligible members (active, not
// cordoned), in join order, hold exactly lease.Split of the ring, which covers [MinToken,
// MaxToken] with no gap and no overlap and shares that differ by at most one token, and the oldest
// eligible member alone is Node-0. A cordoned member holds nothing and is not Node-0.
func checkSettledCoverage(r *fsm.Ring) error {
	if !r.Settled() {
		return fmt.Errorf("ring %s is not settled: %s", r.Key, describeRing(r))
	}
	active := r.ActiveMembers()
	for _, m := range active {
		if r.IsCordoned(m.WorkerID) && (m.Holding() || m.NodeCount != len(active)+boolInt(len(active) == len(r.Cordoned))) {
			return fmt.Errorf("ring %s: cordoned %s holds %v (node %d of %d)", r.Key, m.WorkerID, m.Held(), m.NodeIndex, m.NodeCount)
		}
	}
	eligible := r.EligibleMembers()
	if len(eligible) == 0 {
		return nil
	}
	split := lease.Split(len(eligible))
	next := lease.MinToken
	minW, maxW := ^uint64(0), uint64(0)
	for i, m := range eligible {
		if len(m.Ranges) != 1 || m.Ranges[0] != split[i] {
			return fmt.Errorf("ring %s: member %d %s has %v, want %v", r.Key, i, m.WorkerID, m.Ranges, split[i])
		}
		got := m.Ranges[0]
		if got.Start != next {
			return fmt.Errorf("ring %s: gap or overlap before %v (expected start %d)", r.Key, got, next)
		}
		minW, maxW = min(minW, got.Width()), max(maxW, got.Width())
		if i == len(eligible)-1 {
			if got.End != lease.MaxToken {
				return fmt.Errorf("ring %s: last range ends at %d", r.Key, got.End)
			}
		} else {
			next = got.End + 1
		}
		if m.HoldsNode0() != (i == 0) || m.NodeCount != len(active) {
			return fmt.Errorf("ring %s: member %d %s: node index %d of %d", r.Key, i, m.WorkerID, m.NodeIndex, m.NodeCount)
		}
	}
	if maxW-minW > 1 {
		return fmt.Errorf("ring %s: shares differ by %d tokens", r.Key, maxW-minW)
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func describeRing(r *fsm.Ring) string {
	var b strings.Builder
	fmt.Fprintf(&b, "last_epoch=%d gen=%d", r.LastEpoch, r.Generation)
	for _, m := range r.SortedMembers() {
		fmt.Fprintf(&b, "\n  %s/%s seq=%d active=%v cordoned=%v epoch=%d idx=%d/%d ranges=%v", m.WorkerID, m.Incarnation,
			m.JoinSeq, m.Active, r.IsCordoned(m.WorkerID), m.Epoch, m.NodeIndex, m.NodeCount, m.Ranges)
		for _, h := range m.Holds {
			fmt.Fprintf(&b, " hold(e%d %v node0=%v)", h.Epoch, h.Ranges, h.Node0)
		}
	}
	return b.String()
}

func half(i int) lease.Ranges { return lease.Ranges{lease.Split(2)[i]} }

// checkSettledMinimal checks invariant 1 on a settled ring of the minimal mode: the target covers
// [MinToken, MaxToken] with no gap and no overlap, nothing is reserved, every eligible member holds
// exactly its slot's ranges at its slot's index, the slot of index 0 alone is Node-0, and a
// cordoned member holds nothing.
func checkSettledMinimal(r *fsm.Ring) error {
	if !r.Settled() {
		return fmt.Errorf("ring %s is not settled: %s", r.Key, describeRing(r))
	}
	if err := checkTargetCoverage(r); err != nil {
		return err
	}
	slots := map[string]int{}
	for i, s := range r.Movement.Target {
		if s.Reserved && len(r.EligibleMembers()) > 0 {
			return fmt.Errorf("ring %s settled with %s reserved", r.Key, s.WorkerID)
		}
		slots[s.WorkerID] = i
	}
	for _, m := range r.ActiveMembers() {
		if r.IsCordoned(m.WorkerID) {
			if m.Holding() {
				return fmt.Errorf("ring %s: cordoned %s holds %v (node %d)", r.Key, m.WorkerID, m.Held(), m.NodeIndex)
			}
			continue
		}
		i, ok := slots[m.WorkerID]
		if !ok || m.NodeIndex != i || !m.Ranges.Equal(r.Movement.Target[i].Ranges) || m.HoldsNode0() != (i == 0) {
			return fmt.Errorf("ring %s: %s at node %d with %v, target slot %d (known %v)", r.Key, m.WorkerID, m.NodeIndex, m.Ranges, i, ok)
		}
	}
	return nil
}

// checkTargetCoverage checks that a minimal-mode ring's target gives every token to exactly one
// slot and no slot more ranges than MaxRanges.
func checkTargetCoverage(r *fsm.Ring) error {
	if len(r.Movement.Target) == 0 {
		return nil
	}
	sets := map[string]lease.Ranges{}
	var all lease.Ranges
	for _, s := range r.Movement.Target {
		sets[s.WorkerID] = s.Ranges
		all = all.Union(s.Ranges)
		if len(s.Ranges) > r.Movement.MaxRanges {
			return fmt.Errorf("ring %s: slot %s has %d ranges, more than %d", r.Key, s.WorkerID, len(s.Ranges), r.Movement.MaxRanges)
		}
	}
	if err := checkDisjoint(sets); err != nil {
		return fmt.Errorf("ring %s target: %w", r.Key, err)
	}
	if !all.Equal(lease.Ranges{lease.FullRing}) {
		return fmt.Errorf("ring %s: the target covers %v, not the whole ring", r.Key, all)
	}
	return nil
}
