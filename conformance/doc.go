// Package conformance proves that docs/protocol.md is enough to speak the worker wire protocol:
// it runs a client that shares no code with the coordinator — js/client.mjs, written only from
// docs/protocol.md and docs/product.md on the JavaScript RSocket client (rsocket-js 0.0.27 from
// npm, versions pinned in js/package-lock.json) — against three real coordinators on loopback
// (testkit/ringtest), with the product's default lease timing.
//
// The script holds one scripted conversation and is given a follower's addresses only (RSocket,
// and admin HTTP for the flow controls), and an address list of a port that refuses connections
// and the follower:
//   - its routing metadata is byte for byte the table of the document;
//   - it connects and reconnects by the rule of the document's section 9 (its own DialPlan): a
//     refusing address is passed by for the next one; the follower answers ring.view and
//     ring.leases with not_leader, and the script follows the redirect at once; malformed SETUPs
//     are refused with bad_setup;
//   - alone on its ring, a worker gets the whole ring as Node-0, keeps one element of demand
//     outstanding and receives renewals of the same epoch, each with renewal_ms; when its
//     connection is lost while it holds its lease it retries at once at the next address, passes
//     the refusing one by after 50–150 ms, comes back through the follower's redirect, and keeps
//     its incarnation, epoch and ranges; ring.view agrees with its lease;
//   - it announced "controls": every element carries them; a pause, a rate limit and a resume
//     set through the follower's admin API (which passes them on to the leader) reach it in the
//     first element sent after each commit, the limit as its part (all of it, alone); a rate of
//     0 is refused with 400 bad_request; a worker that announced nothing gets no controls;
//   - unknown_route and bad_request come back as documented;
//   - a second worker joins: the first shrinks at once under a new epoch, the second gets nothing
//     before the first releases, then the other half (disjoint, covering, equal);
//   - the second leaves: ack, its stream completes, the first covers the ring again;
//   - a new incarnation of the first worker's id closes the old connection and gets the ring only
//     after the old incarnation's lease ended, on the script's own monotonic clock;
//   - the ring is switched to the minimal movement mode through the follower's admin API (the
//     answer shows the setting as committed, defaults filled in); three more workers join one
//     after the other, each worker releasing every new epoch it installs: after each join the
//     leases cover the ring with no overlap, every share lies within the tolerance of the mean,
//     a worker whose ranges did not change kept its epoch, and in the end one lease carries
//     several ranges;
//   - over the whole run, no token and no Node-0 role was usable by two holders at one instant.
//
// It prints one JSON line per check and exits non-zero on the first failure; the Go test streams
// those lines to t.Log, fails with the failed check, and fails too when a check is missing.
//
// What this package must never do: import rsocket-go or the coordinator's wire types into the
// client side, or teach the script anything the documents do not say — a fix needed here is a fix
// to docs/protocol.md first. It does not skip: without node or js/node_modules the test fails and
// says to run `make conformance-deps`.
//
// Run it alone:
//
//	make conformance-deps
//	go test -race -count=1 ./conformance/
package conformance
