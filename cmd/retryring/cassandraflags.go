package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gocql/gocql"
	"github.com/spf13/pflag"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/internal/flaglist"
	"github.com/retryring/retryring/internal/tlsfiles"
	"github.com/retryring/retryring/lease"
)

// cassandraPasswordEnv holds the Cassandra password when no password file is given. There is
// deliberately no --cassandra-password flag: a command line is visible to every user of the host.
const cassandraPasswordEnv = "RETRYRING_CASSANDRA_PASSWORD"

// cassandraFlags are the flags of every subcommand that talks to Cassandra.
type cassandraFlags struct {
	hosts       string
	keyspace    string
	consistency string
	// allowWeak accepts a consistency below a quorum (cassandra.Config.AllowWeakConsistency).
	allowWeak bool
	localDC   string
	timeout   time.Duration

	// Client encryption and PasswordAuthenticator (docs/operations.md, "Cassandra: TLS and
	// authentication").
	ca, cert, key, serverName string
	username, passwordFile    string
}

func (c *cassandraFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.hosts, "cassandra", cassandra.DefaultHost, "Cassandra contact points, host:port,...")
	fs.StringVar(&c.keyspace, "keyspace", "retryring", "keyspace of the retry directory")
	fs.StringVar(&c.consistency, "consistency", "LOCAL_QUORUM", "consistency level of reads and writes")
	fs.BoolVar(&c.allowWeak, "allow-weak-consistency", false, "accept a --consistency below a quorum (ONE, LOCAL_ONE, ANY, TWO, THREE): a worker taking over a range can then miss a COMMITTED marker and run a step twice")
	fs.StringVar(&c.localDC, "local-dc", "", "keep queries inside this datacenter: connect to its nodes only (give contact points of it), DC-aware and token-aware routing; never another datacenter's nodes, even when this one is down")
	fs.DurationVar(&c.timeout, "cassandra-timeout", 2*time.Second, "timeout of one Cassandra request")
	fs.StringVar(&c.ca, "cassandra-ca", "", "PEM CA that signed the Cassandra nodes' certificates; turns TLS on (host verification always on)")
	fs.StringVar(&c.cert, "cassandra-cert", "", "PEM client certificate for nodes that require one (with --cassandra-key); turns TLS on")
	fs.StringVar(&c.key, "cassandra-key", "", "PEM key of --cassandra-cert")
	fs.StringVar(&c.serverName, "cassandra-server-name", "", "name the nodes' certificates must carry (default: the address dialled); turns TLS on")
	fs.StringVar(&c.username, "cassandra-username", "", "login for PasswordAuthenticator; the password comes from --cassandra-password-file or "+cassandraPasswordEnv)
	fs.StringVar(&c.passwordFile, "cassandra-password-file", "", "file holding the Cassandra password (one line)")
}

// config is the session configuration, with the password read from its file or the environment.
func (c *cassandraFlags) config() (cassandra.Config, error) {
	password, err := cassandraPassword(c.passwordFile, os.LookupEnv)
	if err != nil {
		return cassandra.Config{}, err
	}
	return cassandra.Config{
		Hosts: flaglist.Split(c.hosts), Keyspace: c.keyspace, Consistency: c.consistency,
		AllowWeakConsistency: c.allowWeak, LocalDC: c.localDC, Timeout: c.timeout,
		Username: c.username, Password: password,
		TLS:        tlsfiles.Files{CA: c.ca, Cert: c.cert, Key: c.key},
		ServerName: c.serverName,
	}, nil
}

// connect opens a session with the flags' configuration.
func (c *cassandraFlags) connect(ctx context.Context) (*gocql.Session, error) {
	cfg, err := c.config()
	if err != nil {
		return nil, err
	}
	return cassandra.Connect(ctx, cfg)
}

// cassandraPassword reads the password from file (its first line, without the line end), or from
// RETRYRING_CASSANDRA_PASSWORD when no file is named; both at once is an error, so that nobody
// wonders which one was used.
func cassandraPassword(file string, lookup func(string) (string, bool)) (string, error) {
	env, inEnv := lookup(cassandraPasswordEnv)
	switch {
	case file != "" && inEnv:
		return "", fmt.Errorf("the Cassandra password is given twice, in --cassandra-password-file and in %s: give one", cassandraPasswordEnv)
	case file == "":
		return env, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("cassandra password file: %w", err)
	}
	// Secrets are often written with a trailing newline (echo, kubectl create secret --from-file).
	password, _, _ := strings.Cut(string(b), "\n")
	password = strings.TrimSuffix(password, "\r")
	if password == "" {
		return "", errors.New("cassandra password file " + file + " is empty")
	}
	return password, nil
}

// ringFlags name the ring: one per (region, cluster, service).
type ringFlags struct {
	region, cluster, service string
	windowMinutes            int
}

func (r *ringFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&r.region, "region", "local", "region of the service")
	fs.StringVar(&r.cluster, "cluster", "default", "cluster of the service")
	fs.StringVar(&r.service, "service", "orders", "service whose failures are retried")
	fs.IntVar(&r.windowMinutes, "window-minutes", 1, "window length L in minutes (divides 1440; the same for writers and workers)")
}

func (r *ringFlags) key() lease.RingKey {
	return lease.RingKey{Region: r.region, Cluster: r.cluster, Service: r.service}
}
