// Package faultproxy puts a controllable TCP hop between two parties so that tests can make a peer
// misbehave the way networks and processes do, without touching the peer's code:
//
//   - Hang: connections stay open but nothing is forwarded in either direction (the end of a stream
//     included), and new connections are accepted but reach nobody. This is what a SIGSTOPped
//     process or a silently dropped path looks like: no FIN, no RST, only silence until someone's
//     timeout fires. A client that gives up on a held connection before Heal never reaches the target.
//   - Cut: every current connection is closed and new ones are refused (accepted, then reset): the
//     peer is cut off.
//   - Heal: back to normal. Bytes held during a Hang are delivered (a SIGCONT); connections closed
//     by a Cut stay closed.
//
// A Proxy is one party's network. It carries connections both ways: inbound, through its own
// listener on 127.0.0.1:0 forwarding to a target address (Listen, Addr, SetTarget); and outbound,
// through Dial, which a component under test can use as its dial function. A connection may obey
// several proxies at once: a listening proxy's Classifier looks at the first bytes of each inbound
// connection (a handshake naming the party that connected) and names the proxies of that party's
// network, so that a worker's connection obeys both the coordinator's network and the worker's own,
// whichever coordinator it reached. A connection flows only while every proxy on its path does.
//
// What it must never do: listen on anything but loopback, decide anything from wall-clock time, or
// leave a goroutine behind after Close.
//
// Usage:
//
//	front, err := faultproxy.Listen(coordinatorAddr)
//	worker := faultproxy.New()
//	front.SetClassifier(func(peek func(int) ([]byte, error)) []*faultproxy.Proxy {
//		return []*faultproxy.Proxy{worker} // after reading who connected from peek
//	})
//	worker.Hang() // the worker goes silent, on every connection it has or makes
//	worker.Heal()
//	front.Close()
package faultproxy
