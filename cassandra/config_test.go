package cassandra

import (
	"errors"
	"log"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/internal/tlsfiles"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/tlstest"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{}.WithDefaults()
	if c.Consistency != "LOCAL_QUORUM" || c.PageSize != 1000 || c.Keyspace != "retryring" ||
		c.SerialConsistency != "LOCAL_SERIAL" || c.Timeout != 2*time.Second || len(c.Hosts) != 1 {
		t.Fatalf("defaults: %+v", c)
	}
	cc, err := Config{LocalDC: "dc1"}.ClusterConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cc.Consistency != gocql.LocalQuorum || cc.SerialConsistency != gocql.LocalSerial || cc.PageSize != 1000 ||
		cc.RetryPolicy != nil || cc.ProtoVersion != 4 || cc.HostFilter == nil {
		t.Fatalf("cluster config: %+v", cc)
	}
	// Without a local datacenter every node is used; with one, only its nodes (the filter
	// itself is gocql's, proven on two datacenters by e2e TestClusterTwoRegions).
	if cc, err := (Config{}).ClusterConfig(); err != nil || cc.HostFilter != nil {
		t.Fatalf("cluster config without a local datacenter: %v, host filter %v", err, cc.HostFilter)
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []Config{
		{Consistency: "MOST"},
		{SerialConsistency: "QUORUM"},
		{PageSize: 10},
		{Keyspace: "1abc"},
		{Keyspace: "a-b"},
		{Timeout: -time.Second},
		{Hosts: []string{" "}},
		{ProtoVersion: 9},
	}
	for _, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("Validate(%+v) accepted", c)
		}
	}
	if err := (Config{Consistency: "quorum", SerialConsistency: "serial"}).Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestWeakConsistencyRefused: a level below a quorum is refused with the reason (a new owner can
// miss a COMMITTED marker) unless the operator allows it; quorum levels and ALL pass.
func TestWeakConsistencyRefused(t *testing.T) {
	for _, name := range []string{"ONE", "local_one", "ANY", "TWO", "THREE"} {
		err := Config{Consistency: name}.Validate()
		if !errors.Is(err, ErrWeakConsistency) || !strings.Contains(err.Error(), "COMMITTED marker") || !strings.Contains(err.Error(), "--allow-weak-consistency") {
			t.Errorf("consistency %s: %v; want ErrWeakConsistency with the reason and the flag", name, err)
		}
		if err := (Config{Consistency: name, AllowWeakConsistency: true}).Validate(); err != nil {
			t.Errorf("consistency %s allowed: %v", name, err)
		}
	}
	for _, name := range []string{"QUORUM", "LOCAL_QUORUM", "EACH_QUORUM", "ALL"} {
		if err := (Config{Consistency: name}).Validate(); err != nil {
			t.Errorf("consistency %s: %v", name, err)
		}
	}
}

func TestParseConsistency(t *testing.T) {
	for name, want := range map[string]gocql.Consistency{
		"ONE": gocql.One, "local_quorum": gocql.LocalQuorum, "QUORUM": gocql.Quorum, " all ": gocql.All,
		"LOCAL_ONE": gocql.LocalOne, "EACH_QUORUM": gocql.EachQuorum,
	} {
		got, err := ParseConsistency(name)
		if err != nil || got != want {
			t.Errorf("ParseConsistency(%q) = %v, %v", name, got, err)
		}
	}
	if _, err := ParseConsistency("SOME"); !errors.Is(err, ErrConsistency) {
		t.Fatalf("want ErrConsistency, got %v", err)
	}
	if c, err := ParseSerialConsistency("local_serial"); err != nil || c != gocql.LocalSerial {
		t.Fatalf("ParseSerialConsistency = %v, %v", c, err)
	}
}

func TestReplication(t *testing.T) {
	cases := map[string]string{
		"":                         "{'class': 'SimpleStrategy', 'replication_factor': 1}",
		"3":                        "{'class': 'SimpleStrategy', 'replication_factor': 3}",
		"eu-west=3,us-east=2":      "{'class': 'NetworkTopologyStrategy', 'eu-west': 3, 'us-east': 2}",
		" us-east = 2 , eu-west=3": "{'class': 'NetworkTopologyStrategy', 'eu-west': 3, 'us-east': 2}",
	}
	for in, want := range cases {
		r, err := ParseReplication(in)
		if err != nil || r.CQL() != want {
			t.Errorf("ParseReplication(%q) = %s, %v; want %s", in, r.CQL(), err, want)
		}
	}
	for _, in := range []string{"0", "x", "dc=0", "=3", "dc=3,", "d'c=1"} {
		if _, err := ParseReplication(in); !errors.Is(err, ErrReplication) {
			t.Errorf("ParseReplication(%q) = %v, want ErrReplication", in, err)
		}
	}
}

func TestSchemaText(t *testing.T) {
	stmts, err := Schema("retryring", Replication{DataCenters: map[string]int{"dc1": 3}})
	if err != nil {
		t.Fatal(err)
	}
	if len(stmts) != 1+len(Tables) {
		t.Fatalf("%d statements for %d tables", len(stmts), len(Tables))
	}
	if !strings.Contains(stmts[0], "NetworkTopologyStrategy") {
		t.Fatalf("keyspace: %s", stmts[0])
	}
	for i, table := range Tables {
		if !strings.Contains(stmts[i+1], "CREATE TABLE IF NOT EXISTS retryring."+table+" (") {
			t.Errorf("statement %d does not create %s:\n%s", i+1, table, stmts[i+1])
		}
		if strings.Contains(stmts[i+1], "KS.") {
			t.Errorf("statement %d keeps a keyspace placeholder", i+1)
		}
	}
	if _, err := Schema("bad-name", Replication{}); !errors.Is(err, ErrKeyspace) {
		t.Fatalf("want ErrKeyspace, got %v", err)
	}
}

func TestEveryStatementRegistered(t *testing.T) {
	st, err := NewStore(&gocql.Session{}, StoreConfig{Keyspace: "ks", Ring: ringKey(), WindowMinutes: 1})
	if err != nil {
		t.Fatal(err)
	}
	for q, text := range st.stmts {
		if strings.Contains(text, "KS.") || !strings.Contains(text, "ks.") {
			t.Errorf("statement not qualified: %s", q)
		}
	}
}

func ringKey() lease.RingKey { return lease.RingKey{Region: "r", Cluster: "c", Service: "s"} }

func TestConfigValidateCredentialsAndTLS(t *testing.T) {
	for _, c := range []Config{
		{Username: "retryring"},
		{Password: "secret"},
		{TLS: tlsfiles.Files{Cert: "client.crt"}},
		{TLS: tlsfiles.Files{Key: "client.key"}},
	} {
		err := c.Validate()
		if !errors.Is(err, ErrConfig) {
			t.Errorf("Validate(%+v) = %v, want ErrConfig", c, err)
		}
	}
	if err := (Config{Username: "retryring", Password: "secret"}).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestClusterConfigTLSVerifiesTheNodes(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA("ca")
	caFile := ca.WriteCA(dir, "ca.pem")
	cert, key := ca.Issue(tlstest.Options{}).Write(dir, "client")

	cc, err := Config{}.ClusterConfig()
	if err != nil || cc.SslOpts != nil || cc.Authenticator != nil {
		t.Fatalf("plain config: TLS %+v, authenticator %v, %v", cc.SslOpts, cc.Authenticator, err)
	}
	cc, err = Config{TLS: tlsfiles.Files{CA: caFile, Cert: cert, Key: key}, ServerName: "cassandra.internal",
		Username: "retryring", Password: "secret"}.ClusterConfig()
	if err != nil {
		t.Fatal(err)
	}
	o := cc.SslOpts
	if o == nil || !o.EnableHostVerification || o.InsecureSkipVerify || o.ServerName != "cassandra.internal" ||
		o.RootCAs == nil || o.GetClientCertificate == nil {
		t.Fatalf("TLS options: %+v", o)
	}
	if a, ok := cc.Authenticator.(gocql.PasswordAuthenticator); !ok || a.Username != "retryring" || a.Password != "secret" {
		t.Fatalf("authenticator: %#v", cc.Authenticator)
	}
	// A server name alone turns TLS on against the system roots.
	cc, err = Config{ServerName: "cassandra.example.com"}.ClusterConfig()
	if err != nil || cc.SslOpts == nil || cc.SslOpts.RootCAs != nil || !cc.SslOpts.EnableHostVerification {
		t.Fatalf("server name only: %+v, %v", cc.SslOpts, err)
	}
	// A missing CA file is named when the configuration is built.
	if _, err := (Config{TLS: tlsfiles.Files{CA: dir + "/missing.pem"}}).ClusterConfig(); !errors.Is(err, tlsfiles.ErrBadFile) ||
		!strings.Contains(err.Error(), "missing.pem") {
		t.Fatalf("missing CA: %v", err)
	}
}

func TestHeldLoggerDropsTheLinesOfAFailedConnectAndPassesTheOthers(t *testing.T) {
	var out strings.Builder
	prev := gocql.Logger
	gocql.Logger = log.New(&out, "", 0)
	t.Cleanup(func() { gocql.Logger = prev })

	failed := newHeldLogger(nil)
	failed.Printf("gocql: unable to dial control conn %s", "127.0.0.1:9042")
	failed.release(false)
	failed.Println("after", "the connect")
	if got := out.String(); got != "after the connect\n" {
		t.Fatalf("failed connect logged %q", got)
	}

	out.Reset()
	ok := newHeldLogger(nil)
	ok.Print("host 127.0.0.2 down")
	if out.Len() != 0 {
		t.Fatalf("logged while connecting: %q", out.String())
	}
	ok.release(true)
	if got := out.String(); got != "host 127.0.0.2 down\n" {
		t.Fatalf("successful connect logged %q", got)
	}

	// A logger of its own (Config.Logger) gets the lines instead of gocql's global one.
	out.Reset()
	var own strings.Builder
	mine := newHeldLogger(log.New(&own, "", 0))
	mine.release(true)
	mine.Printf("gocql: unable to reconnect control connection: %s", "refused")
	if own.String() != "gocql: unable to reconnect control connection: refused\n" || out.Len() != 0 {
		t.Fatalf("own logger got %q, the global one %q", own.String(), out.String())
	}
}
