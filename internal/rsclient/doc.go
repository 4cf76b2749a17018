// Package rsclient gives rsocket-go's client a connection it can write safely.
//
// rsocket-go v0.8.16's client starts its KEEPALIVE ticker before it asks its transport for a
// connection, then writes SETUP from the caller's goroutine while its write loop may already be
// sending the first KEEPALIVE, both through one unguarded bufio.Writer. On a busy host (or after a
// slow dial) the two writes race: the race detector fails the test that saw it, and the peer may
// read a KEEPALIVE before SETUP (the coordinator refuses any first frame but SETUP) or the bytes of
// two frames interleaved. Transport closes both holes below rsocket-go: every write and flush holds
// one lock, and a KEEPALIVE asked to go before SETUP is dropped (it says only "alive", and the
// SETUP about to follow says more).
//
//	sock, err := rsocket.Connect().
//		KeepAlive(period, lifetime, 1).
//		SetupPayload(setup).
//		Transport(rsclient.Transport(conn)). // conn: dialled (and TLS-handshaken) beforehand
//		Start(ctx)
package rsclient
