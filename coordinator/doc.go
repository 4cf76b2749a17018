// Package coordinator runs one coordinator node of the ring coordinator cluster: a hashicorp/raft
// voter that replicates the fsm state, an RSocket server that streams time-bounded leases to retry
// workers, failure detection of those workers, and the admin HTTP endpoints.
//
// Every node accepts worker connections; only the leader answers them. A follower answers every
// request with not_leader (and the leader's RSocket address, learned from the replicated state)
// while it hears from the leader within the election timeout, else with no_leader at once,
// listing the coordinators it knows. The leader turns what it sees into Raft commands and streams
// what was committed. A reconcile pass (pass.go), at most one per PassInterval, commits per ring
// one fsm.Reconcile carrying the releases, joins, downs and expiries of the pass and the plan made
// on the state they produce; while the version gate keeps Reconcile out, each of them is an entry
// of its own:
//
//	elected, barrier passed         -> commit fsm.CommitTiming (its lease timing), then send
//	worker subscribes ring.leases   -> a join in the next pass
//	fsm.Plan gives new assignments  -> the pass's plan, then push the new lease at once
//	renewal tick                    -> commit a Raft barrier (a proof of leadership, no command),
//	                                   then answer outstanding demand
//	ring.release                    -> a release in the next pass, answered once it is committed
//	ring.leave                      -> commit fsm.Leave, then plan again
//	connection closed or silent     -> a down in the next pass (a member that has not come back to
//	                                   a new leader: once its last lease from an earlier one may
//	                                   have ended)
//	hold no longer possibly in use  -> an expiry in the next pass
//	longest timing waited out       -> commit fsm.RetireTiming
//	operator pause, resume, limit   -> commit fsm.Pause / Resume / Limit, then answer demand at once
//	ring.report                     -> keep it in memory (reports.go), never in Raft; when it changes
//	                                   who has work under a limit, wake the ring's streams (share.go)
//	every report period             -> sample each ring's backlog age, drop reports of members gone
//	KEEPALIVE with the respond flag -> answered on the connection's read goroutine, never seen by
//	                                   rsocket-go (keepalive.go); the silence timeout counts it
//
// What it must never do: send a lease element carrying an assignment that is not committed; send
// anything later than the Raft leader lease timeout after the proposal of the last entry of its term
// that a quorum stored (a barrier or a command: an acknowledgement alone can be stale);
// expire a hold before the last element of that epoch it sent is older than its holder bound, or
// before its own election is older than the leader lease plus the longest committed timing's
// holder bound; decide membership or ranges anywhere but in the committed state.
// docs/architecture.md has the proof sketch these rules come from.
//
// Usage (the binary does exactly this):
//
//	n, err := coordinator.New(coordinator.Config{NodeID: "c1", DataDir: "data/c1", Peers: peers})
//	if err != nil { ... }
//	if err := n.Start(ctx); err != nil { ... }
//	<-sigterm
//	n.Close() // hands leadership over first
//
// The admin HTTP listener (package admin's server, wired in adminnode.go) serves GET / (the ring
// page), GET /v1/ring (the same view as JSON, view.go builds it in admin's types), /healthz,
// /readyz, /v1/status, /v1/peers, /metrics (metrics.go's registry) and the profiles, which read
// and decide nothing (the leader's view adds what workers reported, backlog.go and
// admin.RingBacklog: it is for people and alerts, and no decision of the coordinator reads it);
// the internal registration of a coordinator's addresses; and the calls that change something
// (the ring and worker calls, join, add-peer, remove-peer, step-down). Every handler and every
// answer is package admin's: the caller's authorization at the edge, strict input, the status
// codes and texts, forwarding from a follower to the leader. What they need of this package is
// adminNode (adminnode.go), which implements admin's small interfaces: for status and peers
// (admin.Cluster) this node's Raft state, the configuration, the peers' registered admin
// addresses and a call to a peer through the coordinators' client; for the registration
// (admin.Registrar) the configuration, the state's copy and the commit; for the calls that change
// something (admin.Changer) the command built and checked against the replicated state's bounds,
// the trial, the version gate (register.go) and the commit (admin.go), the forwarding to the
// leader's address (admin.go), the Raft configuration changes (membership.go) and the leadership
// transfer (stepdown.go); for the profiles (admin.AdminGate) the admin token check.
//
// Credentials and limits (auth.go, authfiles.go, limits.go), each off until configured: a SETUP
// is admitted only with a token of its ring (checked before the connection is registered, so a
// refused client leaves no connection, member or Raft entry behind, and is re-checked before every
// lease element, which is how a revoked token's stream ends); every call to the admin HTTP port
// that is not GET or HEAD needs the admin bearer token, and /v1/internal/ the cluster secret or a
// Raft client certificate, both checked once at the HTTP edge before any handler; connections,
// SETUPs per second and lease streams per ring are capped, and what a connection may send before
// its SETUP is admitted is bounded in time and bytes.
//
// A command type is proposed only once every server of the Raft configuration registered an FSM
// version that knows it; a node whose FSM halted at an entry it does not know is not ready and
// does not lead.
//
// Time that decides anything comes from Config.Clock (but a follower's check of its last contact
// with the leader, which reads Raft's process clock). What the leader decides (which members join
// or are down, which holds expire, what each pass commits, what a lease stream is sent and by
// when) is package coordinator/leader's, as functions of plain values tested on a manual clock;
// this package gathers their input, commits and sends what they decide.
package coordinator
