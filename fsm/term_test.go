package fsm_test

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/rs/zerolog"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// inTermLog is the log entry of cmd proposed by the stretch of leadership of term stretch and
// committed in Raft term logTerm.
func inTermLog(tb failer, index, stretch, logTerm uint64, cmd fsm.Command) *raft.Log {
	tb.Helper()
	c, err := fsm.NewInTerm(stretch, cmd)
	if err != nil {
		tb.Fatalf("in_term: %v", err)
	}
	l := commandLog(tb, index, c)
	l.Term = logTerm
	return l
}

// TestCommandOfAnEndedStretchIsRefused: X led term 3 and assigned the whole ring to A; Y led term 4
// and renewed A's lease; X, elected again in term 5 before it noticed, still runs its stretch of
// term 3, whose send log lacks Y's renewals. That stretch's move of A's range to B commits in term
// 5: applied, A (renewed by Y) and B would both hold the range. The FSM refuses it; the same move
// proposed by the stretch of term 5, which waited out Y's leases, applies.
func TestCommandOfAnEndedStretchIsRefused(t *testing.T) {
	f := fsm.New(zerolog.Nop())
	var index uint64
	next := func() uint64 { index++; return index }
	mirror := fsm.NewState() // what the stretch of term 3 believes, and plans on
	for _, c := range []fsm.Command{
		&fsm.Join{Ring: ringA, WorkerID: "A", Incarnation: "a1"},
		&fsm.Assign{Ring: ringA, Assignments: []fsm.Assignment{{WorkerID: "A", Incarnation: "a1", Epoch: 1, NodeIndex: 0, NodeCount: 1, Ranges: lease.Ranges{lease.FullRing}}}},
		&fsm.Join{Ring: ringA, WorkerID: "B", Incarnation: "b1"},
	} {
		if resp := f.Apply(inTermLog(t, next(), 3, 3, c)); resp != nil {
			t.Fatalf("%T in its own term 3: %v", c, resp)
		}
		mustApply(t, mirror, c)
	}
	// The stretch of term 3 saw A fall silent and, from its send log, its lease of epoch 1 end:
	// it downs A, expires epoch 1 and gives the ring to B.
	down := &fsm.Down{Ring: ringA, WorkerID: "A", Incarnation: "a1"}
	mustApply(t, mirror, down)
	expire := &fsm.Expire{Ring: ringA, WorkerID: "A", Incarnation: "a1", UpTo: 1, Generation: mirror.Ring(ringA).Generation}
	mustApply(t, mirror, expire)
	plan := fsm.Plan(mirror.Ring(ringA))
	if plan == nil {
		t.Fatalf("setup: no plan once A's lease expired")
	}
	mustApply(t, mirror, plan)
	move := []fsm.Command{down, expire, plan}
	if b := mustMember(t, mirror, ringA, "B", "b1"); !b.Ranges.Equal(lease.Ranges{lease.FullRing}) {
		t.Fatalf("setup: the stale stretch's commands give B %v, want the whole ring", b.Ranges)
	}
	before, applied := fsmJSON(t, f)
	for _, c := range move {
		resp := f.Apply(inTermLog(t, next(), 3, 5, c))
		if err, ok := resp.(error); !ok || !errors.Is(err, fsm.ErrStaleTerm) {
			t.Fatalf("%T of the stretch of term 3 committed in term 5: response %v, want ErrStaleTerm", c, resp)
		}
	}
	if got, idx := fsmJSON(t, f); got != before || idx != applied+uint64(len(move)) {
		t.Fatalf("commands of an ended stretch changed the state (applied index %d, want %d):\nbefore %s\nafter  %s",
			idx, applied+uint64(len(move)), before, got)
	}
	if err := f.Halted(); err != nil {
		t.Fatalf("a refused stale command halted the FSM: %v", err)
	}
	// The stretch of term 5 waited out Y's leases; its own down of A applies.
	if resp := f.Apply(inTermLog(t, next(), 5, 5, move[0])); resp != nil {
		t.Fatalf("a command of the stretch of term 5 in term 5: %v", resp)
	}
	if got, _ := fsmJSON(t, f); got == before {
		t.Fatalf("a command of the current stretch changed nothing")
	}
}

// TestInTermRefusesWhatItCannotCarry: an in_term of term 0, one that carries another in_term or
// nothing, is malformed; the State alone refuses it (it does not know the entry's term).
func TestInTermRefusesWhatItCannotCarry(t *testing.T) {
	inner, _ := fsm.NewInTerm(2, &fsm.Join{Ring: ringA, WorkerID: "A", Incarnation: "a1"})
	if _, err := fsm.NewInTerm(2, inner); !errors.Is(err, fsm.ErrMalformed) {
		t.Fatalf("NewInTerm of an in_term: %v, want ErrMalformed", err)
	}
	nested, _ := fsm.Encode(inner)
	for name, c := range map[string]*fsm.InTerm{
		"term 0":  {Term: 0, Entry: inner.Entry},
		"nested":  {Term: 2, Entry: nested},
		"nothing": {Term: 2},
	} {
		f := fsm.New(zerolog.Nop())
		l := commandLog(t, 1, c)
		l.Term = 2
		if resp, ok := f.Apply(l).(error); !ok || !errors.Is(resp, fsm.ErrMalformed) {
			t.Errorf("%s: response %v, want ErrMalformed", name, resp)
		}
	}
	if err := fsm.NewState().Apply(inner); !errors.Is(err, fsm.ErrMalformed) {
		t.Fatalf("State.Apply of an in_term: %v, want ErrMalformed", err)
	}
}
