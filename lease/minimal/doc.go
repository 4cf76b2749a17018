// Package minimal is the minimal-movement assignment of a ring's tokens (product.md, "Beyond one
// machine"; issue 19, item 3): beside today's contiguous equal split (lease.Split), which moves half
// of the ring when a member joins at the last place, it trades exact equality for movement, within
// the bounds below. It is pure: a Planner takes an Assignment (members in node-index order, each
// with its ranges) and a change, and returns the new Assignment with the moves that lead to it. It
// never does I/O and never reads a clock (the time of a leave and of an expiry is given). fsm/
// plans a ring in the minimal movement mode with it (fsm/target.go), handing on a reserved member
// by HandOn when the leader says its delay ran out rather than by Expire.
//
// Why a package of its own: lease/ is what every worker links (the guard, the wire types); this is
// leader-side policy with its own configuration and a long argument, and fsm/ will call it as the
// sibling of the contiguous split.
//
// # Parameters
//
// Config: τ (Tolerance, default 10 %), k (MaxRanges, default 16, at least ⌈1/τ⌉+2), MergeAbove
// (default k/2), ReturnDelay (default 10 s, one lease TTL) and StepMoves (the churn budget of one
// even-out step, default 8 moves). Below, T = 2^64 tokens and n counts every member, active or
// reserved; lo = ⌊(1−τ)·T/n⌋, mean = ⌊T/n⌋, hi = ⌈(1+τ)·T/n⌉ (the bounds "within τ of the mean").
//
// # Changes
//
//   - Join of a new id: it takes the next node index. Every member above hi (of n+1) gives its
//     excess; then the newcomer takes what it still lacks of the mean from the most loaded members,
//     each down to lo at most. A donor gives a range touching the newcomer's if it has one, else
//     cuts its largest range at an end, or gives a whole range: a donor never gains a range. A
//     reserved member gives nothing, so a ring whose members have all left gives a newcomer
//     nothing until their reservations are handed on to it by Expire.
//   - Leave: the member keeps its node index and its ranges, reserved, for ReturnDelay; nothing
//     moves. A join of its id in that time (a new incarnation, a rolling restart) is a return: it
//     gets its index and exactly its old ranges back, and nothing moves.
//   - Expire (the delay ran out), or a leave with a negative ReturnDelay: the hand-on. Each of the
//     leaver's ranges goes, in pieces, to the least loaded active members: those under lo (of n−1)
//     first, each filled up to hi but leaving enough for the others under lo, then those under hi,
//     preferring a member whose range the piece touches (it gains no range). The member of the
//     highest node index takes the leaver's index. A reservation outlives its delay while no active
//     member is left to take it (the last worker of a ring that leaves keeps its ranges).
//
// # Bounds, and why they hold
//
//  1. Coverage, always: every token of [-2^63, 2^63-1] has exactly one owner, active or reserved.
//     The first member gets the whole ring, and every operation only hands a piece its giver
//     holds to another member (Subtract from one, Union to the other).
//  2. At most k ranges per member. A donor and a giver in a push never gain a range (they give
//     whole ranges or the end of one); the newcomer stops taking before a (k+1)-th range; a
//     hand-on only gives to a member under k ranges or whose range the piece touches; a merge
//     gives a range to the member whose range it touches. The one exception is coverage winning:
//     a hand-on piece that touches only reserved members' ranges while every active member holds
//     k ranges goes to the least loaded anyway. The generated histories never met it.
//  3. Balance within τ right after a change, when the ring was settled before it (every member
//     active, within τ, at most MergeAbove ranges): every active member holds between lo and hi.
//     Join: donors above hi come down to hi and no donor goes below lo; members that gave nothing
//     held at least lo(n) ≥ lo(n+1); the newcomer takes the mean, or the excess above hi when that
//     is more, which from a state within τ is at most T/(n+1) ≤ hi. Hand-on: the members' room
//     under hi(n−1) is (1+τ)·T − (T − s) ≥ s for a leaver holding s, and their deficit under
//     lo(n−1) is at most (n−1)·(lo(n−1) − lo(n)) = (1−τ)·T/n ≤ s, so the leaver's tokens fill every
//     deficit and fit; a receiver gains at most one range per range of the leaver (a cut piece
//     fills it to hi), so with at most k/2 ranges each before no receiver reaches k. The newcomer
//     of a join takes one or two pieces from each of about 1/τ donors, which k ≥ ⌈1/τ⌉+2 leaves
//     room for: an estimate, not a proof, which the generated histories check
//     (TestHistoriesKeepEveryBound, after every change from a settled ring). The bound needs room in k:
//     with no idle time between changes, members fill up towards k ranges and a change may leave a
//     member outside τ. In 200 joins and leaves back to back (bench/movement -changes 200, 10
//     sequences) that happened after 0.9 % of the changes at N = 30 and 2.5 % at N = 100 with
//     k = 16, and 11.8 % at N = 30 with k = 12; the next idle spell brings it back. A return
//     restores the old ranges exactly, whatever changed meanwhile, so it gives no balance bound of
//     its own; a member's reserved share is frozen until then.
//  4. Movement. A join moves only to the newcomer, at most max(mean, the excess above hi), so at
//     most T/(n+1) plus a token from a settled ring: within 1/(N+1) + τ/N (N = members before).
//     A leave moves nothing, a return nothing; a hand-on moves exactly the leaver's tokens, at
//     most hi(n) = (1+τ)·T/n, and nothing else.
//  5. node_index: dense by construction (Assignment.Members is indexed by it) and stable: a join
//     appends, a leave and a return keep every index, a hand-on changes one member's index (the
//     highest, which takes the leaver's). Node-0 (index 0) changes only when Node-0 itself is
//     handed on. The member count changes only at a join and a hand-on, never at a leave or a
//     return, so a rolling restart changes no member's count, index or ranges.
//  6. Idle: EvenOut brings every share to ⌊T/n⌋ or one token more (within one token) and every
//     member to at most MergeAbove ranges, with at most max(StepMoves, n−1) moves a step, and then
//     returns no move (Settled). It refuses to run while a reservation is pending (the ring is not
//     idle). Shares move by pushes along a path of members whose ranges touch, each giving the next
//     the end of a range: nobody gains a range, and each push either brings a member to its target
//     or empties a range, so the steps end. A merge gives a member's smallest range to the less
//     loaded member whose range touches it, and pushes repair the balance. A push is one path of
//     at most n−1 moves; a step starts one even when it is longer than its budget, so that every
//     step makes progress.
//
// What cannot hold at once, and what is given up: equal shares to one token, 1/(N+1) moved per
// join and few ranges. For every old member to come down to T/(N+1) exactly, each must give the
// newcomer its own T/(N(N+1)): N pieces, so the newcomer would hold N ranges. Letting donors go
// down to lo instead of the mean means that about 1/τ donors suffice (each can give about
// (τ + 1/N)·T/N), which is why k is at least ⌈1/τ⌉+2; exact equality is then restored only when
// idle, by pushes that cost moves but no ranges. The same arithmetic says what the idle even-out
// costs: for shares within one token after a join, every old member must give something, so any
// assignment that reaches one token makes at least N handovers per join (the contiguous split
// makes N too). What this mode saves is the share moved, hence the instances re-scanned, and the
// rush: the slivers move when the ring is idle, StepMoves at a time (docs/benchmarks.md, Figure 18).
//
// Use:
//
//	p, err := minimal.NewPlanner(minimal.Config{}) // the ring's replicated setting
//	a, moves, err := p.Join(a, "w7")                // a new member, or a return within the delay
//	a, moves, err = p.Leave(a, "w3", now)           // reserves w3's ranges
//	a, moves = p.Expire(a, now)                     // hands on what is due (see Due)
//	a, moves = p.EvenOut(a)                         // once per interval while idle, until Settled
package minimal
