package main

import (
	"github.com/retryring/retryring/coordinator/auth"

	"crypto/tls"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/retryring/retryring/internal/tlsfiles"
)

// coordinatorTLSFlags are the coordinator's TLS flags (docs/operations.md, section TLS). None set:
// plain TCP everywhere.
type coordinatorTLSFlags struct {
	server         tlsfiles.Files
	raft           tlsfiles.Files
	requireBinding bool
}

func (f *coordinatorTLSFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.server.Cert, "tls-cert", "", "PEM certificate of the RSocket and admin HTTP listeners (TLS on both)")
	fs.StringVar(&f.server.Key, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&f.server.CA, "tls-client-ca", "", "PEM CA of worker certificates: mutual TLS on RSocket; admin HTTP verifies a client certificate if given")
	fs.StringVar(&f.raft.Cert, "raft-tls-cert", "", "PEM certificate of this coordinator for Raft and calls between coordinators (mutual TLS)")
	fs.StringVar(&f.raft.Key, "raft-tls-key", "", "PEM private key of --raft-tls-cert")
	fs.StringVar(&f.raft.CA, "raft-tls-ca", "", "PEM CA that signs every coordinator's Raft certificate, and nothing else")
	fs.BoolVar(&f.requireBinding, "tls-require-worker-id-binding", false,
		"refuse worker certificates without a URI SAN "+auth.WorkerIDPrefixURI+"<prefix> (needs --tls-client-ca)")
}

func (f *coordinatorTLSFlags) config() auth.TLS {
	return auth.TLS{Server: f.server, Raft: f.raft, RequireWorkerBinding: f.requireBinding}
}

// workerTLSFlags are a worker's TLS flags towards the coordinators. None set: plain TCP.
type workerTLSFlags struct {
	files tlsfiles.Files
}

func (f *workerTLSFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.files.CA, "coordinator-ca", "", "PEM CA that signs the coordinators' certificates: TLS to the coordinators (empty with --coordinator-cert: the system roots)")
	fs.StringVar(&f.files.Cert, "coordinator-cert", "", "PEM client certificate for coordinators that require mutual TLS")
	fs.StringVar(&f.files.Key, "coordinator-key", "", "PEM private key of --coordinator-cert")
}

// config is the lease client's TLS configuration; nil when no flag is set.
func (f *workerTLSFlags) config() (*tls.Config, error) {
	if !f.files.Enabled() {
		return nil, nil
	}
	cfg, err := tlsfiles.Client(f.files, "", nil)
	if err != nil {
		return nil, fmt.Errorf("--coordinator-ca/--coordinator-cert/--coordinator-key: %w", err)
	}
	return cfg, nil
}
