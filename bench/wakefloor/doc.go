// Command wakefloor measures the floor under the leader's CPU at many steady lease streams: what
// a Go server costs on this machine that does nothing but take small frames off many loopback TCP
// connections, one goroutine per connection, at the rate the lease clients' KEEPALIVEs arrive
// (figure 10). It starts itself as a child process that serves (the server), opens the
// connections from the parent, writes a 20-byte frame on each every period (the starts spread
// over the period), and reads the child's CPU time and read(2)/write(2) counts from /proc over a
// steady window. With -answer-every k the server writes a 20-byte answer to every k-th frame of a
// connection, as the coordinator answers a KEEPALIVE that asks.
//
// It runs no rsocket-go, no Raft and no lease stream: the figure is what any Go server pays per
// frame for the wake-up of its reading goroutine and the system calls, the part of the leader's
// CPU no change inside the coordinator can remove while the KEEPALIVE period stays.
package main
