// Package admin is the coordinator's admin HTTP API as far as it needs no Raft: the ring view
// (RingView, the answer of GET /v1/ring and of the ring.view route, with its members, controls,
// movement mode, reports and backlog), the ring page drawn from it (GET /), the answers of
// /readyz, /v1/status, /v1/peers and /v1/leader/step-down (status.go), and the calls that change
// something: their bodies and answers (actions.go), their handlers (rings.go: pause, resume,
// limit, movement; workers.go: cordon, uncordon; peers.go: join, add-peer, remove-peer;
// stepdown.go), the plumbing they share (call.go: the body, the strict decode, the errors
// answered with their codes, a follower's forwarding) and the sentinels they answer (errors.go).
//
// It owns the JSON shapes of the view, byte for byte the wire format ctl, the demo and the
// benchmarks read; the backlog a leader derives from its members' reports (RingBacklog); the page:
// its template, its layout of shares, bars and sparklines, and the texts for people (ClockText,
// ages, rates); and the Server: the edge asked before any handler, the routes, the JSON answers of
// an unknown path (404) and a wrong method (405), GET /, GET /v1/ring, GET /healthz and GET
// /readyz, and with ServeChanges every call that changes something: the path, the body read
// strictly, the checks that need no replicated state (a limit is one of the two and above 0, a
// peer has a node id and an address), the status code of each error, and the decision to forward
// a call to the leader.
//
// It never reads Raft, the replicated state, a clock or the network, and decides nothing. What it
// needs of a coordinator is Node, defined here and kept small (the id, the view, the leader's
// backlog samples, the clock, the readiness, the edge's check), and for the calls that change
// something Changer (whether this node leads; commit a Change, built into its command and checked
// against the replicated state's bounds by the coordinator; forward a call to the leader; add or
// remove a voter and read the configuration; step down). Package coordinator implements both and
// imports this package, never the reverse, because the view and the commands are built from what
// only the coordinator has. So the page, the backlog, the routing and the calls' handlers are
// tested on hand-written views and a fake Node and Changer, without a cluster, and nothing here
// can become a safety input. The handlers that stay the coordinator's (status and peers, which
// ask the peers; metrics; profiles; the internal registration of a coordinator's addresses) are
// added with Handle and HandlePrefix.
//
//	s := admin.New(node, log)                            // node implements admin.Node
//	s.ServeChanges(changer)                              // and admin.Changer: the calls that change something
//	s.Handle("/v1/status", http.MethodGet, serveStatus) // a route the coordinator serves itself
//	s.HandlePrefix("/debug/pprof/", serveProfiles)     // every method: the handler answers 405
//	http.Serve(ln, s)
package admin
