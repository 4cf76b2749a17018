// Package admin is what the coordinator's admin HTTP API shows people and programs: the ring view
// (RingView, the answer of GET /v1/ring and of the ring.view route, with its members, controls,
// movement mode, reports and backlog) and the ring page drawn from it (GET /).
//
// It owns the JSON shapes of the view, byte for byte the wire format ctl, the demo and the
// benchmarks read; the backlog a leader derives from its members' reports (RingBacklog); and the
// page: its template, its layout of shares, bars and sparklines, and the texts for people
// (ClockText, ages, rates).
//
// It never reads Raft, the replicated state, a clock or the network: the coordinator builds the
// view from what it knows (Node.View) and hands it, with the time and the leader's backlog
// samples, to RenderPage. So the page and the backlog are tested on views written by hand, without
// a cluster, and nothing here can become a safety input.
//
//	v := node.View()                                        // the coordinator's side
//	v.Rings[i].Backlog = admin.RingBacklog(v.Rings[i], now) // on the leader, reports filled in
//	err := admin.RenderPage(w, v, samples, now, 2)          // GET /?refresh=2
package admin
