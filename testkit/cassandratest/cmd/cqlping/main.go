// Command cqlping checks that Cassandra answers CQL: it connects to -addr, reads
// release_version from system.local, prints it and exits 0; otherwise it prints the
// error and exits 1. scripts/cassandra.sh uses it as the readiness check, also of a node with
// client encryption (-tls-insecure or -ca, -cert/-key) and PasswordAuthenticator (-username, the
// password in $CQLPING_PASSWORD so that it stays off the command line).
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/internal/tlsfiles"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9042", "host:port of the native transport")
	timeout := flag.Duration("timeout", 5*time.Second, "connect and query timeout")
	insecure := flag.Bool("tls-insecure", false, "TLS without verifying the node's certificate (a readiness probe of one's own node)")
	ca := flag.String("ca", "", "TLS: PEM CA that signed the node's certificate")
	cert := flag.String("cert", "", "TLS: PEM client certificate (a file holding the key too will do for -key)")
	key := flag.String("key", "", "TLS: PEM key of -cert")
	username := flag.String("username", "", "PasswordAuthenticator login; the password is $CQLPING_PASSWORD")
	flag.Parse()
	gocql.Logger = log.New(io.Discard, "", 0) // keep the readiness loop quiet

	host, p, err := net.SplitHostPort(*addr)
	if err != nil {
		fail(err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		fail(err)
	}
	c := gocql.NewCluster(host)
	c.Port = port
	c.ProtoVersion = 4
	c.ConnectTimeout = *timeout
	c.Timeout = *timeout
	c.NumConns = 1
	c.DisableInitialHostLookup = true
	c.Consistency = gocql.One
	if *insecure || *ca != "" || *cert != "" {
		files := tlsfiles.Files{CA: *ca, Cert: *cert, Key: *key}
		cfg, err := tlsfiles.Client(files, "", nil)
		if err != nil {
			fail(err)
		}
		cfg.InsecureSkipVerify = *insecure
		c.SslOpts = &gocql.SslOptions{Config: cfg, EnableHostVerification: !*insecure}
	}
	if *username != "" {
		c.Authenticator = gocql.PasswordAuthenticator{Username: *username, Password: os.Getenv("CQLPING_PASSWORD")}
	}
	s, err := c.CreateSession()
	if err != nil {
		fail(err)
	}
	defer s.Close()
	var v string
	if err := s.Query("SELECT release_version FROM system.local").Scan(&v); err != nil {
		fail(err)
	}
	fmt.Println(v)
}

// fail prints what benchkit.Fail prints, but is not it: scripts/cassandra.sh builds cqlping to
// probe a starting node, and benchkit would link the coordinator and the worker into that probe
// (gocql and internal/tlsfiles are all it needs).
func fail(err error) {
	fmt.Fprintln(os.Stderr, "cqlping:", err)
	os.Exit(1)
}
