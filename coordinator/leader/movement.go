package leader

import (
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/retryring/retryring/fsm"
)

// DecideHandOns is the return delay of a minimal-mode ring (fsm.HandOn): a slot reserved for a
// worker id that may come back is handed on once this term has seen it reserved for the ring's
// ReturnDelay (a replicated parameter of the setting). The state keeps no time, and this leader does not know when an earlier one saw the
// reservation begin: seen is when this term first saw it, so a failover lengthens a pending delay
// by at most one delay, and never shortens it. A ring with no eligible member hands nothing on
// (nobody could take it), but its delays run. It returns when the next hand-on not yet due becomes due.
func DecideHandOns(now time.Time, r *fsm.Ring, seen func(fsm.Slot) time.Time) ([]fsm.HandOn, time.Time) {
	slots := r.Reservations()
	if len(slots) == 0 {
		return nil, time.Time{}
	}
	delay := r.Movement.Config().ReturnDelay
	var out []fsm.HandOn
	var wake time.Time
	for _, s := range slots {
		due := seen(s).Add(delay) // seen first: the delay counts while nobody could take it too
		if len(r.EligibleMembers()) == 0 {
			continue
		}
		if now.Before(due) {
			if wake.IsZero() || due.Before(wake) {
				wake = due
			}
			continue
		}
		out = append(out, fsm.HandOn{Ring: r.Key, WorkerID: s.WorkerID, Generation: r.Generation})
	}
	return out, wake
}

// DecideEvenOut is the idle even-out of a minimal-mode ring (fsm.EvenOut): once this term has seen
// the ring settled (no membership change, nothing reserved, no step in flight) at its generation
// and step for the setting's idle time, and its target is not even yet, it proposes the next
// step. The idle time is also the steps' spacing: StepMoves moves per idle time is the even-out's
// churn budget (a step that must cross more members, N−1, moves more, once), replicated with the
// setting so that every leader spends the same. seen is when this term first saw the ring so, as
// for DecideHandOns.
func DecideEvenOut(now time.Time, r *fsm.Ring, seen func() time.Time) (*fsm.EvenOut, time.Time) {
	if r.Movement == nil || !r.Settled() || len(r.Reservations()) > 0 || r.EvenedOut() {
		return nil, time.Time{}
	}
	if due := seen().Add(r.Movement.Config().Idle); now.Before(due) {
		return nil, due
	}
	return &fsm.EvenOut{Ring: r.Key, Generation: r.Generation, Step: r.Movement.EvenOutSteps}, time.Time{}
}

// Seen is when this term first saw each reserved slot of a minimal-mode ring (DecideHandOns: by
// ring id, worker id and the generation it was reserved at) and each such ring settled
// (DecideEvenOut: by ring id, generation and even-out step). A term starts with none.
type Seen map[string]time.Time

// movements runs DecideHandOns and DecideEvenOut over every ring (in ring id order), noting in
// the returned Seen when this term first saw each reservation and each ring settled at a
// generation and step, and forgetting those that ended. seen is not modified.
func movements(now time.Time, rings map[string]*fsm.Ring, seen Seen) ([]fsm.Command, time.Time, Seen) {
	next := Seen{}
	firstSeen := func(key string) time.Time {
		at, ok := seen[key]
		if !ok {
			at = now
		}
		next[key] = at
		return at
	}
	var out []fsm.Command
	var wake time.Time
	later := func(w time.Time) {
		if !w.IsZero() && (wake.IsZero() || w.Before(wake)) {
			wake = w
		}
	}
	for _, id := range slices.Sorted(maps.Keys(rings)) {
		r := rings[id]
		handOns, w := DecideHandOns(now, r, func(s fsm.Slot) time.Time {
			return firstSeen(id + "\x00slot\x00" + s.WorkerID + "\x00" + strconv.FormatUint(s.ReservedAt, 10))
		})
		later(w)
		for i := range handOns {
			out = append(out, &handOns[i])
		}
		if r.Movement == nil {
			continue
		}
		step, w := DecideEvenOut(now, r, func() time.Time {
			return firstSeen(id + "\x00idle\x00" + strconv.FormatUint(r.Generation, 10) + "\x00" + strconv.FormatUint(r.Movement.EvenOutSteps, 10))
		})
		later(w)
		if step != nil {
			out = append(out, step)
		}
	}
	return out, wake, next
}
