package cassandra

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/internal/tlsfiles"
)

// Config says how to reach Cassandra. The zero value of every field means its default.
type Config struct {
	// Hosts are contact points, "host" or "host:port". Default 127.0.0.1:9042.
	Hosts []string
	// Keyspace holds the retry tables. Default "retryring".
	Keyspace string
	// Consistency of reads and writes, by name (ONE, LOCAL_ONE, QUORUM, LOCAL_QUORUM, ...).
	// Default LOCAL_QUORUM: a quorum inside the local datacenter, so no query waits on a WAN.
	Consistency string
	// AllowWeakConsistency accepts a Consistency below a quorum (WeakConsistency), which Validate
	// otherwise refuses (--allow-weak-consistency).
	AllowWeakConsistency bool
	// SerialConsistency of the checkpoint compare-and-sets: SERIAL or LOCAL_SERIAL (default).
	SerialConsistency string
	// Timeout bounds one request to Cassandra. Default 2 s. A worker must keep it below its lease
	// TTL minus the guard margin, or the guard refuses every query; `schema apply` wants more.
	Timeout time.Duration
	// ConnectTimeout bounds dialing and the protocol handshake. Default 5 s.
	ConnectTimeout time.Duration
	// PageSize is the number of rows per page of every paged read. Default 1000.
	PageSize int
	// LocalDC, when set, keeps queries inside that datacenter: the driver connects to its nodes
	// only (gocql.DataCentreHostFilter) and spreads over them (DCAwareRoundRobinPolicy, which
	// alone would fall back to other datacenters' nodes once the local ones are down, and then
	// LOCAL_QUORUM would be the other datacenter's quorum: reads of markers its COMMITTED may
	// not have reached yet). Otherwise hosts are used round robin. Both are wrapped in
	// TokenAwareHostPolicy.
	LocalDC string
	// NumConns is the number of connections per host. Default 2.
	NumConns int
	// ProtoVersion is the native protocol version. Default 4, the newest gocql v1.7.0 speaks in
	// full; setting it also skips the version probe at connect.
	ProtoVersion int
	// Username and Password log in to a node that runs PasswordAuthenticator; both or neither.
	// Password comes from a file or the environment, never from a command line (ReadPassword).
	Username string
	Password string
	// TLS names the PEM files of client encryption. CA verifies the nodes' certificates (empty:
	// the system roots); Cert and Key, together, are the client certificate of nodes that set
	// require_client_auth.
	TLS tlsfiles.Files
	// ServerName is the name every node's certificate must carry; empty: the address dialled,
	// so each node's certificate needs that IP (or host name) as a subject alternative name.
	// TLS is on when ServerName or any TLS file is set, and then the nodes' certificates are
	// always verified: gocql's EnableHostVerification is on.
	ServerName string
	// Logger receives the driver's own lines (a host down, a control connection that could not
	// reconnect), which it writes at every attempt. Nil: gocql's global logger. Either way the
	// lines of a Connect that fails are dropped: its error says why in one line.
	Logger gocql.StdLogger
}

// TLSEnabled reports whether connections are encrypted.
func (c Config) TLSEnabled() bool { return c.TLS.Enabled() || c.ServerName != "" }

// Defaults of Config.
const (
	DefaultHost              = "127.0.0.1:9042"
	DefaultKeyspace          = "retryring"
	DefaultConsistency       = "LOCAL_QUORUM"
	DefaultSerialConsistency = "LOCAL_SERIAL"
	DefaultTimeout           = 2 * time.Second
	DefaultConnectTimeout    = 5 * time.Second
	DefaultPageSize          = 1000
	DefaultNumConns          = 2
	DefaultProtoVersion      = 4
)

// WithDefaults fills every zero field with its default.
func (c Config) WithDefaults() Config {
	if len(c.Hosts) == 0 {
		c.Hosts = []string{DefaultHost}
	}
	if c.Keyspace == "" {
		c.Keyspace = DefaultKeyspace
	}
	if c.Consistency == "" {
		c.Consistency = DefaultConsistency
	}
	if c.SerialConsistency == "" {
		c.SerialConsistency = DefaultSerialConsistency
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.PageSize == 0 {
		c.PageSize = DefaultPageSize
	}
	if c.NumConns == 0 {
		c.NumConns = DefaultNumConns
	}
	if c.ProtoVersion == 0 {
		c.ProtoVersion = DefaultProtoVersion
	}
	return c
}

// Validate checks the configuration after defaults.
func (c Config) Validate() error {
	c = c.WithDefaults()
	if err := ValidateKeyspace(c.Keyspace); err != nil {
		return err
	}
	cons, err := ParseConsistency(c.Consistency)
	if err != nil {
		return err
	}
	if WeakConsistency(cons) && !c.AllowWeakConsistency {
		return fmt.Errorf("%w: %v reads and writes fewer replicas than a quorum, so a worker that takes over a range can miss a COMMITTED marker its predecessor wrote and run the step again; use LOCAL_QUORUM or QUORUM (a single node at QUORUM is one replica), or say --allow-weak-consistency", ErrWeakConsistency, cons)
	}
	if _, err := ParseSerialConsistency(c.SerialConsistency); err != nil {
		return err
	}
	switch {
	case c.Timeout < 0 || c.ConnectTimeout < 0:
		return fmt.Errorf("%w: negative timeout", ErrConfig)
	case c.PageSize < 100:
		// Smaller pages turn a bucket of 50,000 rows into hundreds of round trips.
		return fmt.Errorf("%w: page size %d is below 100", ErrConfig, c.PageSize)
	case c.NumConns < 1:
		return fmt.Errorf("%w: num conns %d", ErrConfig, c.NumConns)
	case c.ProtoVersion < 3 || c.ProtoVersion > 5:
		return fmt.Errorf("%w: protocol version %d", ErrConfig, c.ProtoVersion)
	}
	for _, h := range c.Hosts {
		if strings.TrimSpace(h) == "" {
			return fmt.Errorf("%w: empty host", ErrConfig)
		}
	}
	switch {
	case c.Username == "" && c.Password != "":
		return fmt.Errorf("%w: a password without a username", ErrConfig)
	case c.Username != "" && c.Password == "":
		return fmt.Errorf("%w: username %q without a password (give a password file or the environment variable)", ErrConfig, c.Username)
	case (c.TLS.Cert == "") != (c.TLS.Key == ""):
		return fmt.Errorf("%w: a TLS client certificate and its key go together (certificate %q, key %q)", ErrConfig, c.TLS.Cert, c.TLS.Key)
	}
	return nil
}

// ParseConsistency reads a consistency level name, in any letter case.
func ParseConsistency(name string) (gocql.Consistency, error) {
	c, err := gocql.ParseConsistencyWrapper(strings.TrimSpace(name))
	if err != nil {
		return 0, fmt.Errorf("%w: %q", ErrConsistency, name)
	}
	return c, nil
}

// WeakConsistency reports whether c may read or write fewer replicas than a quorum: ANY, ONE,
// LOCAL_ONE, and TWO and THREE, which are a quorum only for some replication factors. A read at
// such a level need not overlap the replicas the last write reached.
func WeakConsistency(c gocql.Consistency) bool {
	switch c {
	case gocql.Any, gocql.One, gocql.LocalOne, gocql.Two, gocql.Three:
		return true
	}
	return false
}

// ParseSerialConsistency reads SERIAL or LOCAL_SERIAL, in any letter case.
func ParseSerialConsistency(name string) (gocql.SerialConsistency, error) {
	var c gocql.SerialConsistency
	if err := c.UnmarshalText([]byte(strings.ToUpper(strings.TrimSpace(name)))); err != nil {
		return 0, fmt.Errorf("%w: serial %q", ErrConsistency, name)
	}
	return c, nil
}

// ClusterConfig turns the configuration into gocql's. The session keyspace stays unset: every
// statement names its keyspace, so the session also works before the keyspace exists.
func (c Config) ClusterConfig() (*gocql.ClusterConfig, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.WithDefaults()
	cons, _ := ParseConsistency(c.Consistency)
	serial, _ := ParseSerialConsistency(c.SerialConsistency)

	cc := gocql.NewCluster(c.Hosts...)
	cc.Consistency = cons
	cc.SerialConsistency = serial
	cc.Timeout = c.Timeout
	cc.ConnectTimeout = c.ConnectTimeout
	cc.PageSize = c.PageSize
	cc.NumConns = c.NumConns
	cc.ProtoVersion = c.ProtoVersion
	fallback := gocql.RoundRobinHostPolicy()
	if c.LocalDC != "" {
		fallback = gocql.DCAwareRoundRobinPolicy(c.LocalDC)
		cc.HostFilter = gocql.DataCentreHostFilter(c.LocalDC)
	}
	cc.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(fallback)
	// No cluster-wide retry policy: the Store retries the statements it marks idempotent and
	// nothing else, so a compare-and-set is never sent twice behind the caller's back.
	cc.RetryPolicy = nil
	if c.Username != "" {
		cc.Authenticator = gocql.PasswordAuthenticator{Username: c.Username, Password: c.Password}
	}
	if c.TLSEnabled() {
		// tlsfiles reads the files now, so that a missing, malformed or expired client
		// certificate is named here rather than in a handshake error of every node.
		tc, err := tlsfiles.Client(c.TLS, c.ServerName, nil)
		if err != nil {
			return nil, fmt.Errorf("cassandra: %w", err)
		}
		cc.SslOpts = &gocql.SslOptions{Config: tc, EnableHostVerification: true}
	}
	return cc, nil
}

// Connect opens a session. gocql cannot be cancelled while it connects, so when ctx ends first
// Connect returns ctx's error and closes the session that arrives later.
func Connect(ctx context.Context, c Config) (*gocql.Session, error) {
	cc, err := c.ClusterConfig()
	if err != nil {
		return nil, err
	}
	type result struct {
		s   *gocql.Session
		err error
	}
	// gocql flattens the cause of a failed connect into its message (%v); the observer sees the
	// error itself, which explain turns into one line saying what is wrong.
	seen := &connectErrors{}
	cc.ConnectObserver = seen
	logs := newHeldLogger(c.Logger)
	cc.Logger = logs
	done := make(chan result, 1)
	go func() {
		s, err := cc.CreateSession()
		done <- result{s, err}
	}()
	select {
	case r := <-done:
		logs.release(r.err == nil)
		if r.err != nil {
			return nil, seen.explain(c.WithDefaults(), r.err)
		}
		return r.s, nil
	case <-ctx.Done():
		logs.release(true)
		go func() {
			if r := <-done; r.s != nil {
				r.s.Close()
			}
		}()
		return nil, ctx.Err()
	}
}
