// Package auth is the coordinator's authentication of workers, operators and the other
// coordinators by tokens: the token and secret files (--worker-tokens, --admin-token-file,
// --cluster-secret-file), parsed with errors that name the line and the key, re-read every second
// with one log line per change, and the checks a coordinator makes with them: a worker's SETUP
// token against its ring's tokens (again before every lease element), an admin bearer token, the
// cluster secret on calls between coordinators.
//
// Files hold SHA-256 digests, never tokens, and every comparison runs in constant time over every
// entry, so neither a leaked file nor the time a check takes tells anything about a valid token.
//
// It never reads the network and keeps no per-client state: the coordinator calls it at the edge
// (SETUP, each lease element, each admin HTTP call), counts the refusals and answers the client.
// TLS (certificates, client certificates that bind worker ids) stays with the listeners in the
// coordinator package.
//
//	a, err := auth.New(auth.Files{WorkerTokens: "workers.yaml"}, log)
//	go a.Run(stop)
//	adm, err := a.AdmitWorker(setup)           // at SETUP: a *lease.WireError when refused
//	err = a.StillAdmitted(setup.Ring(), adm)   // before each lease element
package auth
