// Package admin is the coordinator's admin HTTP API as far as it needs no Raft: the ring view
// (RingView, the answer of GET /v1/ring and of the ring.view route, with its members, controls,
// movement mode, reports and backlog), the ring page drawn from it (GET /), the answers of
// /readyz, /v1/status, /v1/peers and /v1/leader/step-down (status.go), the handlers of the calls
// that read (cluster.go: status and peers, which ask the peers in parallel; profiles.go: metrics
// and the profiles; register.go: the internal registration of a coordinator's addresses), and
// the calls that change something: their bodies and answers (actions.go), their handlers
// (rings.go: pause, resume, limit, movement; workers.go: cordon, uncordon; peers.go: join,
// add-peer, remove-peer; stepdown.go), the plumbing they share (call.go: the body, the strict decode, the errors
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
// a call to the leader; with ServeCluster GET /v1/status and GET /v1/peers (the texts that say
// why a leader's or a peer's status is missing); with ServeRegistrations POST
// /v1/internal/register (its bounds and refusals); with ServeMetrics and ServeProfiles /metrics
// and the profiles (the 404 while off, the 401 without an admin token).
//
// It never reads Raft, the replicated state, a clock or the network (a peer is asked through
// Cluster.AskPeer; the profiles are net/http/pprof's own handlers), and decides nothing. What it
// needs of a coordinator is Node, defined here and kept small (the id, the view, the leader's
// backlog samples, the clock, the readiness, the edge's check), and for the calls that change
// something Changer (whether this node leads; commit a Change, built into its command and checked
// against the replicated state's bounds by the coordinator; forward a call to the leader; add or
// remove a voter and read the configuration; step down); for status and peers Cluster (this
// node's status, the configuration, a peer's registered admin address, how far behind its log
// this node is, a call to a peer); for the registration Registrar (in the configuration,
// registered already, commit); for the profiles AdminGate (the admin token's check). Package
// coordinator implements them all with one adapter and imports this package, never the reverse,
// because the view and the commands are built from what only the coordinator has. So the page,
// the backlog, the routing and every handler are tested on hand-written views and fakes, without
// a cluster, and nothing here can become a safety input.
//
//	s := admin.New(node, log)          // node implements admin.Node
//	s.ServeChanges(node)               // admin.Changer: the calls that change something
//	s.ServeCluster(node)               // admin.Cluster: status and peers
//	s.ServeRegistrations(node)         // admin.Registrar: /v1/internal/register
//	s.ServeMetrics(promhttp.Handler()) // any http.Handler
//	s.ServeProfiles(on, node)          // admin.AdminGate
//	http.Serve(ln, s)
package admin
