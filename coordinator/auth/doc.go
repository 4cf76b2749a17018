// Package auth is how a coordinator knows who is calling: tokens and TLS.
//
// Tokens: the token and secret files (--worker-tokens, --admin-token-file,
// --cluster-secret-file), parsed with errors that name the line and the key, re-read every second
// with one log line per change, and the checks a coordinator makes with them: a worker's SETUP
// token against its ring's tokens (again before every lease element), an admin bearer token, the
// cluster secret on calls between coordinators.
//
// TLS: the configuration of every listener and dialer (TLS, NewSetup), the server side of a TLS
// connection whose handshake runs on the connection's own goroutine, bounded in time and in
// concurrency (ServerConn, Listener), the answer to a plain RSocket client on a TLS port, the
// worker ids a client certificate binds (CheckWorkerBinding), and the client handshake with a hint
// when the other side is not configured alike.
//
// Files hold SHA-256 digests, never tokens, and every comparison runs in constant time over every
// entry, so neither a leaked file nor the time a check takes tells anything about a valid token.
//
// It never reads the network and keeps no per-client state: the coordinator calls it at the edge
// (SETUP, each lease element, each admin HTTP call), counts the refusals and answers the client.
// Which listener gets which configuration, and the certificates of a connection by its remote
// address, stay with the coordinator's listeners.
//
//	a, err := auth.New(auth.Files{WorkerTokens: "workers.yaml"}, log)
//	go a.Run(stop)
//	adm, err := a.AdmitWorker(setup)           // at SETUP: a *lease.WireError when refused
//	err = a.StillAdmitted(setup.Ring(), adm)   // before each lease element
package auth
