package fsm_test

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"pgregory.net/rapid"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// world is a leader and its workers simulated over the pure state: no clock, no network. The leader
// proposes commands as the coordinator would (Join, Down, Leave, Release, Expire, Plan+Assign) and
// every command goes through State.Apply.
//
// Without lag, each command is applied to the state it was decided on. With lag, the leader decides
// on the applied state while earlier proposals are still in flight: commands wait in a queue and
// are applied later, in the order they were proposed (the raft log keeps that order).
//
// Next to the state it keeps the worker's view, a naive model of what each worker process may be
// using: every lease it may have received, by epoch, with the step at which the leader last sent
// it. The leader sends a new assignment as soon as it is committed and renews, after every applied
// entry, the current epoch of every active member. A worker stops using epochs older than the one
// it releases; an Expire decided at step D ends the leases sent up to D (time has passed since then)
// but not one the leader sent after D. The state folds the same information into the current
// assignment and holds; the model keeps every epoch whole, so comparing the two checks the hold
// arithmetic and the race between renewals and an Expire in flight.
type world struct {
	st    *fsm.State
	rings []lease.RingKey
	// procs are the worker processes, by ring id and member key; a process outlives its member.
	procs map[procKey]*proc
	// log holds every command as it went through Apply, encoded, for replays through the raft FSM.
	log [][]byte
	// assigns are the Assigns that were accepted, for stale replays.
	assigns []*fsm.Assign
	// lastEpoch, generation and seenEpoch are the monotone values seen so far.
	lastEpoch  map[string]uint64
	generation map[string]uint64
	seenEpoch  map[procKey]uint64
	nextInc    int
	trace      []string
	// now counts applied entries: the leader's logical time.
	now int
	// lag turns on the queue of proposals in flight.
	lag bool
	// minimal: the rings are in the minimal movement mode (newWorld's caller sets it with
	// startMinimal), and an operator may switch a ring's mode back and forth (evMode).
	minimal bool
	queue   []proposal
}

type proposal struct {
	c         fsm.Command
	decidedAt int
}

type procKey struct{ ring, member string }

// proc is one worker process (worker id + incarnation) in one ring, as the worker sees it.
type proc struct {
	ring        lease.RingKey
	workerID    string
	incarnation string
	inUse       map[uint64]*use
}

// use is what the lease of one epoch lets the worker use, and when the leader last sent it.
type use struct {
	ranges   lease.Ranges
	node0    bool
	lastSent int
}

func newWorld(rings ...lease.RingKey) *world {
	return &world{
		st: fsm.NewState(), rings: rings, procs: map[procKey]*proc{},
		lastEpoch: map[string]uint64{}, generation: map[string]uint64{}, seenEpoch: map[procKey]uint64{},
	}
}

// startMinimal puts every ring of the world in the minimal movement mode.
func (w *world) startMinimal(tb failer) {
	tb.Helper()
	w.minimal = true
	for _, k := range w.rings {
		w.mustApply(tb, &fsm.SetMovement{Ring: k, Mode: fsm.ModeMinimal})
	}
}

func (w *world) proc(k lease.RingKey, workerID, incarnation string) *proc {
	key := procKey{fsm.RingID(k), fsm.MemberKey(workerID, incarnation)}
	p := w.procs[key]
	if p == nil {
		p = &proc{ring: k, workerID: workerID, incarnation: incarnation, inUse: map[uint64]*use{}}
		w.procs[key] = p
	}
	return p
}

// apply applies c, decided at step decidedAt, checks that a refused command left the state as it
// was, and updates the worker's view. It returns Apply's error.
func (w *world) apply(tb failer, c fsm.Command, decidedAt int) error {
	tb.Helper()
	before := stateJSON(tb, w.st)
	b, err := fsm.Encode(c)
	if err != nil {
		tb.Fatalf("encode %T: %v", c, err)
	}
	w.log = append(w.log, b)
	applyErr := w.st.Apply(c)
	w.trace = append(w.trace, fmt.Sprintf("%T %+v (decided at %d) -> %v", c, c, decidedAt, applyErr))
	if applyErr != nil {
		if after := stateJSON(tb, w.st); after != before {
			tb.Fatalf("%T was refused (%v) but changed the state", c, applyErr)
		}
		return applyErr
	}
	w.now++
	w.observe(c, decidedAt)
	w.renew()
	// A process whose member the state forgot must not be using anything.
	for key, p := range w.procs {
		if r := w.st.Rings[key.ring]; r != nil && r.Members[key.member] != nil {
			continue
		}
		for e, u := range p.inUse {
			if !u.ranges.Empty() || u.node0 {
				tb.Fatalf("%T forgot %s/%s while its lease of epoch %d (%v node0=%v) may be in use%s", c, p.workerID, p.incarnation, e, u.ranges, u.node0, w.history())
			}
		}
		clear(p.inUse)
	}
	return nil
}

// observe updates the worker's view after c was accepted: a committed assignment is sent, a
// release or an expiry ends what it ends. A Reconcile is its parts in order.
func (w *world) observe(c fsm.Command, decidedAt int) {
	switch c := c.(type) {
	case *fsm.Reconcile:
		for _, part := range c.Commands() {
			w.observe(part, decidedAt)
		}
	case *fsm.Assign:
		w.assigns = append(w.assigns, c)
		for _, a := range c.Assignments {
			m := member(w.st, c.Ring, a.WorkerID, a.Incarnation)
			if m != nil && m.Epoch == a.Epoch && m.Active {
				// Committed: the leader sends what it proposed at once, but only to a member that is
				// active in the applied state (a superseded process may still be connected).
				w.proc(c.Ring, a.WorkerID, a.Incarnation).inUse[a.Epoch] = &use{lease.Normalize(a.Ranges), a.NodeIndex == 0, w.now}
			}
		}
	case *fsm.Release:
		p := w.proc(c.Ring, c.WorkerID, c.Incarnation)
		for e := range p.inUse {
			if e < c.Epoch {
				delete(p.inUse, e)
			}
		}
	case *fsm.Expire:
		p := w.proc(c.Ring, c.WorkerID, c.Incarnation)
		for e, u := range p.inUse {
			if e <= c.UpTo && u.lastSent <= decidedAt {
				delete(p.inUse, e)
			}
		}
	case *fsm.Leave:
		clear(w.proc(c.Ring, c.WorkerID, c.Incarnation).inUse)
	}
}

// renew is the leader answering every outstanding demand: each active member gets its current
// assignment again.
func (w *world) renew() {
	for _, r := range w.st.Rings {
		for _, m := range r.Members {
			if !m.Active || !m.Assigned() {
				continue
			}
			p := w.proc(r.Key, m.WorkerID, m.Incarnation)
			if u := p.inUse[m.Epoch]; u != nil {
				u.lastSent = w.now
			} else {
				p.inUse[m.Epoch] = &use{m.Ranges, m.IsNode0(), w.now}
			}
		}
	}
}

// history is the trace of applied commands, for failure messages.
func (w *world) history() string {
	start := max(0, len(w.trace)-40)
	return "\nlast commands:\n  " + strings.Join(w.trace[start:], "\n  ")
}

// check runs after every step.
func (w *world) check(tb failer) {
	tb.Helper()
	if err := checkStateSafety(w.st); err != nil {
		tb.Fatalf("%v%s", err, w.history())
	}
	for id, r := range w.st.Rings {
		if r.LastEpoch < w.lastEpoch[id] {
			tb.Fatalf("ring %s: last epoch went back from %d to %d", r.Key, w.lastEpoch[id], r.LastEpoch)
		}
		if r.Generation < w.generation[id] {
			tb.Fatalf("ring %s: generation went back from %d to %d", r.Key, w.generation[id], r.Generation)
		}
		w.lastEpoch[id], w.generation[id] = r.LastEpoch, r.Generation
		for key, m := range r.Members {
			pk := procKey{id, key}
			if m.Epoch > r.LastEpoch {
				tb.Fatalf("ring %s: %s has epoch %d past the ring's last epoch %d", r.Key, m.WorkerID, m.Epoch, r.LastEpoch)
			}
			if m.Epoch != 0 {
				if m.Epoch < w.seenEpoch[pk] {
					tb.Fatalf("ring %s: %s/%s epoch went back from %d to %d", r.Key, m.WorkerID, m.Incarnation, w.seenEpoch[pk], m.Epoch)
				}
				w.seenEpoch[pk] = m.Epoch
			}
			for _, h := range m.Holds {
				if h.Epoch >= m.Epoch {
					tb.Fatalf("ring %s: %s holds epoch %d, not older than its current %d", r.Key, m.WorkerID, h.Epoch, m.Epoch)
				}
			}
		}
	}
	w.checkWorkerView(tb)
}

// checkWorkerView compares the processes' own view with the state: what a process may be using is
// held by its member in the state, no token is in use by two processes, at most one process may be
// acting as Node-0, and two processes with one worker id never both use ranges.
func (w *world) checkWorkerView(tb failer) {
	tb.Helper()
	perRing := map[string]map[string]lease.Ranges{}
	node0 := map[string][]string{}
	byWorker := map[string]string{}
	for key, p := range w.procs {
		var ranges lease.Ranges
		usesNode0 := false
		for _, u := range p.inUse {
			ranges = ranges.Union(u.ranges)
			usesNode0 = usesNode0 || u.node0
		}
		if ranges.Empty() && !usesNode0 {
			continue
		}
		name := p.workerID + "/" + p.incarnation
		m := w.st.Rings[key.ring].Members[key.member] // apply already failed if it was forgotten
		if missing := ranges.Subtract(m.Held()); !missing.Empty() {
			tb.Fatalf("ring %s: %s may use %v, which the state does not hold for it\n%s%s", p.ring, name, missing, describeRing(w.st.Rings[key.ring]), w.history())
		}
		if usesNode0 && !m.HoldsNode0() {
			tb.Fatalf("ring %s: %s may act as Node-0 but the state does not hold the role for it%s", p.ring, name, w.history())
		}
		if perRing[key.ring] == nil {
			perRing[key.ring] = map[string]lease.Ranges{}
		}
		perRing[key.ring][name] = ranges
		if usesNode0 {
			node0[key.ring] = append(node0[key.ring], name)
		}
		if !ranges.Empty() {
			wk := key.ring + "\x00" + p.workerID
			if other, ok := byWorker[wk]; ok {
				tb.Fatalf("ring %s: two processes of worker %s use ranges: %s and %s%s", p.ring, p.workerID, other, name, w.history())
			}
			byWorker[wk] = name
		}
	}
	for id, sets := range perRing {
		if err := checkDisjoint(sets); err != nil {
			tb.Fatalf("worker view of ring %q: %v%s", id, err, w.history())
		}
		if len(node0[id]) > 1 {
			sort.Strings(node0[id])
			tb.Fatalf("worker view of ring %q: %v may all act as Node-0%s", id, node0[id], w.history())
		}
	}
}

// Events of a generated history.
const (
	evJoin = iota
	evReconnect
	evDown
	evLeave
	evRelease
	evExpire
	evPlan
	evReplay
	evCoordinator
	evPass
	evCordon
	evHandOn
	evMode
	evEvenOut
	evCount
)

var eventWeights = [evCount]int{evJoin: 12, evReconnect: 6, evDown: 8, evLeave: 4, evRelease: 14, evExpire: 14, evPlan: 30, evReplay: 6, evCoordinator: 6, evPass: 20, evCordon: 8, evHandOn: 8, evMode: 2, evEvenOut: 6}

func drawEvent(t *rapid.T) int {
	total := 0
	for _, w := range eventWeights {
		total += w
	}
	n := rapid.IntRange(0, total-1).Draw(t, "event")
	for ev, w := range eventWeights {
		if n < w {
			return ev
		}
		n -= w
	}
	return evPlan
}

const workerPool = 5

// step draws one event of the leader or a worker, decided on the applied state, and proposes it;
// with lag it may instead commit the oldest proposal in flight. Then it checks everything.
func (w *world) step(t *rapid.T) {
	t.Helper()
	if w.lag && len(w.queue) > 0 && rapid.Bool().Draw(t, "commit") {
		w.commitOne(t)
		w.check(t)
		return
	}
	k := w.rings[rapid.IntRange(0, len(w.rings)-1).Draw(t, "ring")]
	r := w.st.Ring(k)
	var active, assignedActive []*fsm.Member
	if r != nil {
		active = r.ActiveMembers()
		for _, m := range active {
			if m.Assigned() {
				assignedActive = append(assignedActive, m)
			}
		}
	}
	switch ev := drawEvent(t); {
	case ev == evJoin:
		// A new worker, or a new incarnation (a restart) of a known worker id.
		id := fmt.Sprintf("w%d", rapid.IntRange(0, workerPool-1).Draw(t, "worker"))
		w.nextInc++
		w.propose(t, &fsm.Join{Ring: k, WorkerID: id, Incarnation: fmt.Sprintf("i%d", w.nextInc)})
	case ev == evReconnect && w.hasReconnectable(k):
		// A process that lost its connection (or was superseded, or forgotten) comes back.
		var cands []*proc
		for _, p := range w.sortedProcs(k) {
			if m := member(w.st, k, p.workerID, p.incarnation); m == nil || !m.Active {
				cands = append(cands, p)
			}
		}
		p := cands[rapid.IntRange(0, len(cands)-1).Draw(t, "reconnect")]
		w.propose(t, &fsm.Join{Ring: k, WorkerID: p.workerID, Incarnation: p.incarnation})
	case ev == evDown && len(active) > 0:
		m := active[rapid.IntRange(0, len(active)-1).Draw(t, "down")]
		w.propose(t, &fsm.Down{Ring: k, WorkerID: m.WorkerID, Incarnation: m.Incarnation})
	case ev == evLeave && len(active) > 0:
		m := active[rapid.IntRange(0, len(active)-1).Draw(t, "leave")]
		w.propose(t, &fsm.Leave{Ring: k, WorkerID: m.WorkerID, Incarnation: m.Incarnation})
	case ev == evRelease && len(assignedActive) > 0:
		// The worker switched to its newest lease; sometimes the newest it has is an older epoch
		// (the current one is committed but not received yet).
		m := assignedActive[rapid.IntRange(0, len(assignedActive)-1).Draw(t, "release")]
		epoch := m.Epoch
		if rapid.IntRange(0, 3).Draw(t, "older") == 0 {
			epochs := w.inUseEpochs(k, m)
			epoch = epochs[rapid.IntRange(0, len(epochs)-1).Draw(t, "release_epoch")]
		}
		w.propose(t, &fsm.Release{Ring: k, WorkerID: m.WorkerID, Incarnation: m.Incarnation, Epoch: epoch})
	case ev == evExpire && len(fsm.PendingHolds(r)) > 0:
		holds := fsm.PendingHolds(r)
		h := holds[rapid.IntRange(0, len(holds)-1).Draw(t, "expire")]
		w.propose(t, &fsm.Expire{Ring: k, WorkerID: h.WorkerID, Incarnation: h.Incarnation, UpTo: h.Epoch, Generation: r.Generation})
	case ev == evReplay && len(w.assigns) > 0 && !w.lag:
		// A stale Assign applied again (a retried proposal) must change nothing.
		a := w.assigns[rapid.IntRange(0, len(w.assigns)-1).Draw(t, "replay")]
		before := stateJSON(t, w.st)
		if err := w.apply(t, a, w.now); err != nil && !errors.Is(err, fsm.ErrUnsafeAssignment) {
			t.Fatalf("stale assign: %v", err)
		}
		if stateJSON(t, w.st) != before {
			t.Fatalf("a stale Assign changed the state: %+v", a.Assignments)
		}
	case ev == evPass:
		// One pass of the leader over the ring, committed as one Reconcile; decided on the
		// applied state, so with lag its plan may be stale and refused as a whole.
		w.propose(t, drawPass(t, w.st, k, func() string { w.nextInc++; return fmt.Sprintf("i%d", w.nextInc) }, false))
	case ev == evCordon && r != nil && len(r.Members) > 0:
		// An operator cordons or uncordons a worker id of the ring (any of its incarnations).
		ms := r.SortedMembers()
		m := ms[rapid.IntRange(0, len(ms)-1).Draw(t, "cordon")]
		w.propose(t, &fsm.Cordon{Ring: k, WorkerID: m.WorkerID, Clear: rapid.Bool().Draw(t, "uncordon")})
	case ev == evHandOn && len(r.Reservations()) > 0:
		// The leader's return delay for a reserved slot ran out.
		slots := r.Reservations()
		slot := slots[rapid.IntRange(0, len(slots)-1).Draw(t, "hand_on")]
		w.propose(t, &fsm.HandOn{Ring: k, WorkerID: slot.WorkerID, Generation: r.Generation})
	case ev == evEvenOut && r != nil && r.Movement != nil:
		// The leader found the ring idle: one even-out step (nothing while it is not settled).
		w.propose(t, &fsm.EvenOut{Ring: k, Generation: r.Generation, Step: r.Movement.EvenOutSteps})
	case ev == evMode && w.minimal:
		// An operator switches the ring's movement mode, in the middle of whatever is under way.
		mode := rapid.SampledFrom([]string{fsm.ModeContiguous, fsm.ModeMinimal}).Draw(t, "mode")
		c := &fsm.SetMovement{Ring: k, Mode: mode}
		if mode == fsm.ModeMinimal {
			c.Tolerance = rapid.SampledFrom([]float64{0, 0.25}).Draw(t, "tolerance")
		}
		w.propose(t, c)
	case ev == evCoordinator:
		id := fmt.Sprintf("c%d", rapid.IntRange(0, 2).Draw(t, "coordinator"))
		if rapid.Bool().Draw(t, "register") {
			w.propose(t, &fsm.RegisterCoordinator{Coordinator: fsm.Coordinator{ID: id, RaftAddr: id + ":7000"}})
		} else {
			w.propose(t, &fsm.RemoveCoordinator{ID: id})
		}
	default:
		if w.lag {
			if plan := fsm.Plan(r); plan != nil {
				w.propose(t, plan)
			}
		} else {
			w.planAndAssign(t, k)
		}
	}
	w.check(t)
}

// propose applies c at once, or queues it when proposals lag.
func (w *world) propose(tb failer, c fsm.Command) {
	tb.Helper()
	if w.lag {
		w.queue = append(w.queue, proposal{c, w.now})
		return
	}
	w.mustApply(tb, c)
}

// commitOne applies the oldest proposal in flight. It may be refused: a stale Assign (or a
// Reconcile carrying one) is refused by design, and a Release may name a member that left in the
// meantime.
func (w *world) commitOne(tb failer) {
	tb.Helper()
	p := w.queue[0]
	w.queue = w.queue[1:]
	err := w.apply(tb, p.c, p.decidedAt)
	_, pass := p.c.(*fsm.Reconcile)
	// A pass is refused as a whole by any stale part, among them a release decided before its
	// member was forgotten and came back with nothing assigned (ErrBadEpoch).
	if err != nil && !errors.Is(err, fsm.ErrUnsafeAssignment) && !errors.Is(err, fsm.ErrUnknownMember) && !(pass && errors.Is(err, fsm.ErrBadEpoch)) {
		tb.Fatalf("%T %+v decided at %d: %v%s", p.c, p.c, p.decidedAt, err, w.history())
	}
}

func (w *world) drain(tb failer) {
	tb.Helper()
	for len(w.queue) > 0 {
		w.commitOne(tb)
		w.check(tb)
	}
}

func (w *world) mustApply(tb failer, c fsm.Command) {
	tb.Helper()
	if err := w.apply(tb, c, w.now); err != nil {
		tb.Fatalf("%T %+v: %v%s", c, c, err, w.history())
	}
}

// planAndAssign is the leader's planning step: a plan made on the current state must be accepted.
func (w *world) planAndAssign(tb failer, k lease.RingKey) *fsm.Assign {
	tb.Helper()
	r := w.st.Ring(k)
	a := fsm.Plan(r)
	if a == nil {
		return nil
	}
	if err := w.apply(tb, a, w.now); err != nil {
		tb.Fatalf("a plan made on the current state was refused: %v\nplan: %+v\n%s", err, a.Assignments, describeRing(r))
	}
	for _, as := range a.Assignments {
		if m := member(w.st, k, as.WorkerID, as.Incarnation); m == nil || m.Epoch != as.Epoch {
			tb.Fatalf("the plan for %s was accepted but not installed", as.WorkerID)
		}
	}
	return a
}

func (w *world) sortedProcs(k lease.RingKey) []*proc {
	var out []*proc
	for key, p := range w.procs {
		if key.ring == fsm.RingID(k) {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return fsm.MemberKey(out[i].workerID, out[i].incarnation) < fsm.MemberKey(out[j].workerID, out[j].incarnation)
	})
	return out
}

func (w *world) hasReconnectable(k lease.RingKey) bool {
	for _, p := range w.sortedProcs(k) {
		if m := member(w.st, k, p.workerID, p.incarnation); m == nil || !m.Active {
			return true
		}
	}
	return false
}

// inUseEpochs lists the epochs the worker of m may be using, oldest first.
func (w *world) inUseEpochs(k lease.RingKey, m *fsm.Member) []uint64 {
	var out []uint64
	for e := range w.proc(k, m.WorkerID, m.Incarnation).inUse {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	if len(out) == 0 {
		out = []uint64{m.Epoch}
	}
	return out
}

// settle ends every change as the leader would once the ring is quiet: every active worker
// releases its current epoch, every pending hold expires, and the leader plans again, until
// Plan returns nil. It returns the number of accepted plans.
func (w *world) settle(tb failer, k lease.RingKey) int {
	tb.Helper()
	w.drain(tb)
	for rounds := 0; ; rounds++ {
		r := w.st.Ring(k)
		if r == nil {
			return rounds
		}
		for _, m := range r.ActiveMembers() {
			if m.Assigned() {
				w.mustApply(tb, &fsm.Release{Ring: k, WorkerID: m.WorkerID, Incarnation: m.Incarnation, Epoch: m.Epoch})
				w.check(tb)
			}
		}
		for _, h := range fsm.PendingHolds(w.st.Ring(k)) {
			w.mustApply(tb, &fsm.Expire{Ring: k, WorkerID: h.WorkerID, Incarnation: h.Incarnation, UpTo: h.Epoch, Generation: w.st.Ring(k).Generation})
			w.check(tb)
		}
		if r := w.st.Ring(k); r != nil && len(r.ActiveMembers()) > 0 {
			for _, slot := range r.Reservations() {
				w.mustApply(tb, &fsm.HandOn{Ring: k, WorkerID: slot.WorkerID, Generation: w.st.Ring(k).Generation})
				w.check(tb)
			}
		}
		if w.planAndAssign(tb, k) == nil {
			return rounds
		}
		w.check(tb)
		if rounds > 10 {
			tb.Fatalf("ring %s does not settle\n%s", k, describeRing(w.st.Ring(k)))
		}
	}
}
