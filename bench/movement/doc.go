// Command movement measures what a membership change moves under the two assignment modes, side by
// side on the same generated sequences: today's contiguous equal split (lease.Split among the
// members in join order) and the minimal-movement assignment (lease/minimal, default Config). It
// is pure arithmetic: no coordinator, no Cassandra, no clock; the figures are counts and do not
// depend on the machine.
//
// For each N (-n), -seqs sequences of -changes changes each start from a ring of N members (for
// the minimal mode: N joins, then even-out steps until settled) and alternate a join of a new id
// (N → N+1) with a leave of a random member (back to N), the same member in both modes. In the
// minimal mode a leave is the hand-on at the end of its return delay, and the ring is left idle
// after each change until settled: what those even-out steps move is reported apart. A rolling
// restart (every member leaves and comes back, as a new incarnation of its id: at the last place
// of the join order for the contiguous split, within the return delay for the minimal mode) is
// measured once per sequence.
//
// It prints the command, date and machine, then markdown tables: share of the ring moved per join
// and per leave (mean and max), handovers per change (pairs of members between which tokens
// moved), the even-out's share per change, the rolling restart's, and ranges per member.
//
//	go run ./bench/movement                          # N = 3, 10, 30, 100; 40 sequences of 20 changes
//	go run ./bench/movement -n 10 -seqs 200 -tolerance 0.05
package main
