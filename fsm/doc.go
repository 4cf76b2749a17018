// Package fsm is the replicated state of the coordinator cluster: the coordinators, their
// addresses and FSM versions; the lease timing leaders committed; and one ring per (region,
// cluster, service) with its flow controls (pauses, rate limit), its members, their incarnations,
// join order, node index, current assignment (epoch and ranges) and the holds that older
// assignments may still have on tokens. It is applied by hashicorp/raft on every coordinator.
//
// The state is the safety record of the ring. A token is "held" by a member while any assignment that
// gave it the token may still be in use by the worker: its current assignment, and every older one
// that was neither released by the worker nor expired by the leader. Apply refuses an Assign that
// would give a token, or the Node-0 role, to a member while another member holds it, so exclusivity
// does not depend on the leader planning correctly.
//
// What this package must never do: read a clock, touch the network, or decide that time has passed.
// Time enters only through commands: the leader, which tracks when it sent each lease, proposes
// Expire once a hold can no longer be in use, naming the ring generation it decided on (an Expire
// decided before the member reconnected changes nothing: the leader renewed its lease since).
//
// Walk-through of a join, as the leader drives it:
//
//	Apply(Join{B})               // B is a member with no ranges yet
//	Plan(ring) -> [A: first half (epoch 5, A's second half becomes a hold), B: nothing yet (epoch 6)]
//	Apply(Assign{...})           // committed; leases carrying epochs 5 and 6 may now be sent
//	Apply(Release{A, epoch 5})   // A stopped using its second half
//	Plan(ring) -> [B: second half (epoch 7)]
//	Apply(Assign{...})
//
// A leader of FSM version 3 commits each pass over a ring as one Reconcile instead: the releases,
// joins, downs and expiries of the pass, then the plan made on the state they produce, all or
// nothing (Reconcile.Commands lists them as the separate commands above).
//
// Cordon (FSM version 4): an operator's Cordon marks a worker id of a ring; Plan gives its
// members no range and a node index after every other member (never Node-0), so what they held
// becomes holds that end by release or expiry like any shrinking member's. The cordon is kept by
// worker id (a restart stays cordoned) and goes with the last member of that id.
//
// Lease timing: a leader commits the timing it runs with (CommitTiming) before it sends a lease,
// and the state keeps the longest one (TimingState.Longest): a later leader bounds every lease an
// earlier one may have sent by that, not by its own flags, so a rolling restart onto a shorter
// TTL never moves a range while a lease of the longer one may be in use. RetireTiming lowers it
// once a leader has waited that bound out.
//
// Epoch floor (FSM version 4): the first leader of a bootstrapped or recovered state commits
// EpochFloor before anything else, lifting every ring's epoch counter above any epoch the cluster
// may have sent before it was rebuilt (FloorAt), and with Settle turns the assignments it finds
// into holds; the state is then Settling until that leader, or a later one, has waited out every
// lease of before and commits Settled. A ring created later starts at the floor.
//
// Commands in a term (FSM version 5): a leader wraps each command in an InTerm carrying the Raft
// term of its stretch of leadership; FSM.Apply applies it only in a log entry of that term, so a
// stretch that ended before its leader noticed commits nothing (ErrStaleTerm).
//
// Movement mode (FSM version 6): SetMovement makes a ring's assignment the minimal-movement one of
// lease/minimal (Ring.Movement) instead of the contiguous split; a replicated setting of the ring,
// so that every leader plans it alike. Its target (one slot per worker id, in node-index order)
// is in the state and follows the members as commands apply; Plan gives each member its slot
// minus what others hold, as in the contiguous mode. Time enters, as for Expire, only through the
// leader's commands: HandOn once a reserved slot's return delay ran out, EvenOut once the ring was
// idle long enough.
//
// Every command is idempotent (raft may apply a command whose proposer saw ErrLeadershipLost, and a
// new leader may propose it again) and carries a type byte and a body version byte. Every type and
// body version belongs to an FSM version (Version, CommandType.Since); a node that meets one its
// version does not know halts (FSM.Halted) instead of skipping it, and the leader's version gate
// keeps that from happening in a rolling upgrade. Snapshots carry the FSM version their state
// needs.
package fsm
