package main

import (
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
)

// cassandraFlags are the flags of every subcommand that talks to Cassandra.
type cassandraFlags struct {
	hosts       string
	keyspace    string
	consistency string
	localDC     string
	timeout     time.Duration
}

func (c *cassandraFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.hosts, "cassandra", cassandra.DefaultHost, "Cassandra contact points, host:port,...")
	fs.StringVar(&c.keyspace, "keyspace", "retryring", "keyspace of the retry directory")
	fs.StringVar(&c.consistency, "consistency", "LOCAL_QUORUM", "consistency level of reads and writes")
	fs.StringVar(&c.localDC, "local-dc", "", "keep queries inside this datacenter (token-aware, DC-aware routing)")
	fs.DurationVar(&c.timeout, "cassandra-timeout", 2*time.Second, "timeout of one Cassandra request")
}

func (c *cassandraFlags) config() cassandra.Config {
	return cassandra.Config{
		Hosts: splitList(c.hosts), Keyspace: c.keyspace, Consistency: c.consistency,
		LocalDC: c.localDC, Timeout: c.timeout,
	}
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

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
