// Package admin is the coordinator's admin HTTP API as far as it needs no Raft: the ring view
// (RingView, the answer of GET /v1/ring and of the ring.view route, with its members, controls,
// movement mode, reports and backlog), the ring page drawn from it (GET /), the answers of
// /readyz, /v1/status, /v1/peers and /v1/step-down (status.go), the bodies and answers of the calls
// that change something (actions.go), and the server that routes every admin call.
//
// It owns the JSON shapes of the view, byte for byte the wire format ctl, the demo and the
// benchmarks read; the backlog a leader derives from its members' reports (RingBacklog); the page:
// its template, its layout of shares, bars and sparklines, and the texts for people (ClockText,
// ages, rates); and the Server: the edge asked before any handler, the routes, the JSON answers of
// an unknown path (404) and a wrong method (405), GET /, GET /v1/ring, GET /healthz and GET
// /readyz.
//
// It never reads Raft, the replicated state, a clock or the network, and decides nothing. What it
// needs of a coordinator is Node, defined here and kept small (the id, the view, the leader's
// backlog samples, the clock, the readiness, the edge's check); package coordinator implements it and imports
// this package, never the reverse, because the view is built from what only the coordinator has.
// So the page, the backlog and the routing are tested on hand-written views and a fake Node,
// without a cluster, and nothing here can become a safety input. The handlers that read or change
// the replicated state (status, peers, step-down, the mutations and their forwarding to the
// leader, membership, metrics) are still the coordinator's, added with Handle and HandlePrefix.
//
//	s := admin.New(node, log)                         // node implements admin.Node
//	s.Handle("/v1/status", http.MethodGet, serveStatus) // a route the coordinator serves itself
//	s.HandlePrefix("/v1/rings/", serveRingAction)     // every method: the handler answers 405
//	http.Serve(ln, s)
package admin
