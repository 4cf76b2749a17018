// Package leader is what the coordinator's leader decides, as functions of plain values: the
// commands to commit, the lease elements to send, and when to look again. It is the leader's
// counterpart of package fsm: fsm says what the replicated state becomes when a command is
// applied, leader says which commands the leader proposes, given that state.
//
// Step is one reconcile pass. Its input is everything the pass looks at: the committed rings
// (a snapshot), the members' connections as the leader sees them, the sends so far (the last
// send of each member's epochs in this term), the releases workers sent since the last pass,
// the term's times and timing, and now. Its output is what the pass commits, in order (the
// entries of their own first, then one entry per ring), and when the next pending decision
// falls due. The coordinator's leaderTerm gathers the input, calls Step, commits and schedules
// the wake; it owns the Raft and RSocket I/O, the locks and the goroutines.
//
// Element is what a lease stream is sent now, decided on the committed ring; the decision carries
// the latest moment it may still be written (Send.WriteBy, the end of the proof of leadership it
// was decided under), which the coordinator's stream checks again just before the write. The
// stream decides twice per send, once outside the send log's lock and once inside it: Element's
// doc says why.
//
// What this package must never do: read a clock, touch the network, Raft or RSocket, start a
// goroutine, take a lock or log. Time enters as a value (Input.Now, Times), so the decisions are
// tested on a manual clock with transcripts (testdata/decide: the decisions with what the workers
// receive; testdata/step: one Step at a time) and with generated histories, with no sleeps.
//
// Walk-through of a failover, as the coordinator drives it:
//
//	times := Times{ElectedAt: e, LeaderLease: llt, HolderBound: b, InheritedBound: b, GraceEnd: g}
//	out := Step(Input{Now: now, Times: times, Rings: rings, Conns: conns, Sends: sends, ...})
//	// commit out.Commit one by one, then out.Passes (one entry per ring) together;
//	// wake again at out.Wake (zero: at the next renewal)
//
// A member that has not come back to the new leader is not down before Times.DownAfter, and no
// hold expires before Times.HoldsAliveUntil: the new leader knows no send time of an earlier one.
package leader
