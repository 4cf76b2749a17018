package main

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"

	"github.com/retryring/retryring/coordinator"
	"github.com/retryring/retryring/internal/tlsfiles"
	"github.com/retryring/retryring/testkit/tlstest"
)

// benchTLS is the TLS of a -tls on run, as a production cluster would have it: a Raft CA signing
// every coordinator's certificate (used for Raft, RSocket and admin HTTP), mutual TLS for the
// workers with a certificate of a worker CA that binds the swarm's worker ids (w1, w2, ...).
type benchTLS struct {
	coordArgs []string    // the coordinators' TLS flags
	client    *tls.Config // every lease client's
	admin     *tls.Config // the harness's polls of the admin ports
}

func newBenchTLS(dir string) (*benchTLS, error) {
	dir = filepath.Join(dir, "pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	raftCA, workerCA := tlstest.NewCA("bench-raft-ca"), tlstest.NewCA("bench-worker-ca")
	raftCAFile, workerCAFile := raftCA.WriteCA(dir, "raft-ca.crt"), workerCA.WriteCA(dir, "worker-ca.crt")
	cert, key := raftCA.Issue(tlstest.Options{CommonName: "coordinator"}).Write(dir, "coordinator")
	wCert, wKey := workerCA.Issue(tlstest.Options{CommonName: "swarm", URIs: []string{coordinator.WorkerIDPrefixURI + "w"}}).Write(dir, "worker")
	client, err := tlsfiles.Client(tlsfiles.Files{CA: raftCAFile, Cert: wCert, Key: wKey}, "", nil)
	if err != nil {
		return nil, fmt.Errorf("bench TLS: %w", err)
	}
	return &benchTLS{
		coordArgs: []string{
			"--tls-cert", cert, "--tls-key", key, "--tls-client-ca", workerCAFile,
			"--raft-tls-cert", cert, "--raft-tls-key", key, "--raft-tls-ca", raftCAFile,
		},
		client: client,
		admin:  &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: raftCA.Pool()},
	}, nil
}
