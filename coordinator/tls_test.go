package coordinator

import (
	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/coordinator/auth"

	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/internal/tlsfiles"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/tlstest"
	"github.com/retryring/retryring/worker/leaseclient"
)

// pki is the certificates of a test cluster: the Raft CA signs the coordinators' certificates
// (one per node, used for Raft, RSocket and admin HTTP alike), the worker CA the workers'.
type pki struct {
	dir                                   string
	raftCA                                *tlstest.CA
	workerCA                              *tlstest.CA
	other                                 *tlstest.CA // trusted by nobody
	raftCAFile, workerCAFile, otherCAFile string
}

func newPKI(t testing.TB) *pki {
	p := &pki{dir: t.TempDir(), raftCA: tlstest.NewCA("raft-ca"), workerCA: tlstest.NewCA("worker-ca"), other: tlstest.NewCA("other-ca")}
	p.raftCAFile = p.raftCA.WriteCA(p.dir, "raft-ca.crt")
	p.workerCAFile = p.workerCA.WriteCA(p.dir, "worker-ca.crt")
	p.otherCAFile = p.other.WriteCA(p.dir, "other-ca.crt")
	return p
}

// coordinatorTLS is the TLS of node name: its certificate of ca for every listener, mutual TLS
// for workers of the worker CA, and Raft TLS against the Raft CA.
func (p *pki) coordinatorTLS(name string, ca *tlstest.CA) auth.TLS {
	cert, key := ca.Issue(tlstest.Options{CommonName: name}).Write(p.dir, name)
	return auth.TLS{
		Server: tlsfiles.Files{Cert: cert, Key: key, CA: p.workerCAFile},
		Raft:   tlsfiles.Files{Cert: cert, Key: key, CA: p.raftCAFile},
	}
}

// workerTLS is a lease client's TLS: it trusts the Raft CA (which signs the coordinators') and
// presents leaf, if any.
func (p *pki) workerTLS(t testing.TB, leaf *tlstest.Leaf) *tls.Config {
	t.Helper()
	cfg, err := tlsfiles.Client(tlsfiles.Files{CA: p.raftCAFile}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if leaf != nil {
		// As tlsfiles.Client does: the certificate goes out whatever CAs the server names.
		cfg.GetClientCertificate = presenting(leaf)
	}
	return cfg
}

func presenting(leaf *tlstest.Leaf) func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &leaf.TLS, nil }
}

// logLines collects a lease client's log lines so that a test can read what the worker says.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// tlsClient is a running lease client with its log.
type tlsClient struct {
	*leaseclient.Client
	log      *logLines
	leases   atomic.Int64
	lastAddr atomic.Value // string: the coordinator of the last element
}

func startTLSClient(t testing.TB, workerID string, cfg *tls.Config, addrs []string) *tlsClient {
	t.Helper()
	c := &tlsClient{log: &logLines{}}
	cl, err := leaseclient.New(leaseclient.Config{
		WorkerID: workerID, Ring: lease.RingKey{Region: "eu", Cluster: "c1", Service: "orders"},
		Coordinators: addrs, TLS: cfg,
		Logger:  zerolog.New(c.log).Level(zerolog.InfoLevel),
		Backoff: leaseclient.Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond},
		OnElement: func(e leaseclient.Element) {
			c.leases.Add(1)
			c.lastAddr.Store(e.Coordinator)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Client = cl
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = cl.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return c
}

// refusal waits until the client logged a failed connection whose error says want, and returns
// that line.
func (c *tlsClient) refusal(t testing.TB, want string) string {
	t.Helper()
	var line string
	eventually(t, 15*time.Second, "the worker to log "+want, func() bool {
		for _, l := range strings.Split(c.log.String(), "\n") {
			if strings.Contains(l, "reconnecting") && strings.Contains(l, want) {
				line = l
				return true
			}
		}
		return false
	})
	return line
}

func newTLSCluster(t testing.TB, size int, p *pki, mutate func(i int, c *Config)) *testCluster {
	return newCluster(t, size, func(i int, c *Config) {
		c.TLS = p.coordinatorTLS(c.NodeID, p.raftCA)
		if mutate != nil {
			mutate(i, c)
		}
	})
}

func TestTLSClusterServesLeasesAndSurvivesLeaderKill(t *testing.T) {
	p := newPKI(t)
	c := newTLSCluster(t, 3, p, nil)
	leader := c.leader() // every node registered: the followers' registrations went over https
	w := startTLSClient(t, "orders-7", p.workerTLS(t, p.workerCA.Issue(tlstest.Options{
		CommonName: "orders", URIs: []string{auth.WorkerIDPrefixURI + "orders-"}})), c.rsocketAddrs())
	eventually(t, 15*time.Second, "a lease over TLS", func() bool { return w.leases.Load() > 0 })
	if got := w.lastAddr.Load(); got != leader.RSocketAddr() {
		t.Fatalf("lease came from %v, want the leader %s", got, leader.RSocketAddr())
	}

	leader.Kill()
	next := c.leader()
	before := w.leases.Load()
	eventually(t, 15*time.Second, "a renewal from the new leader over TLS", func() bool {
		return w.leases.Load() > before && w.lastAddr.Load() == next.RSocketAddr()
	})
	if _, ok := w.Guard().Current(); !ok {
		t.Fatal("the worker holds no lease after the failover")
	}

	// An admin call to a follower reaches the leader over https (the follower presents its Raft
	// certificate), and the caller reaches the follower over https.
	follower := c.followers(next)[0]
	caller := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.raftCA.Pool()}}}
	resp, err := caller.Post("https://"+follower.HTTPAddr()+ringPath(testRing, admin.ActionPause), "application/json", strings.NewReader(`{"reason":"tls"}`))
	if err != nil {
		t.Fatal(err)
	}
	var answer admin.ControlsAnswer
	err = json.NewDecoder(resp.Body).Decode(&answer)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || answer.LeaderID != next.cfg.NodeID || !answer.Controls.Paused {
		t.Fatalf("pause through follower %s over https: %d %+v %v", follower.cfg.NodeID, resp.StatusCode, answer, err)
	}
}

func ringMembers(n *Node) []string {
	var out []string
	n.fsm.View(func(s *fsm.State, _ uint64) {
		for _, r := range s.Rings {
			for _, m := range r.Members {
				out = append(out, m.WorkerID)
			}
		}
	})
	return out
}

// stateOf is the node's replicated state as JSON, and its applied index.
func stateOf(t testing.TB, n *Node) (string, uint64) {
	var b []byte
	var idx uint64
	var err error
	n.fsm.View(func(s *fsm.State, i uint64) { b, err, idx = mustJSON(s), nil, i })
	if err != nil {
		t.Fatal(err)
	}
	return string(b), idx
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func TestRaftCertificateOfAnotherCACannotJoin(t *testing.T) {
	p := newPKI(t)
	c := newTLSCluster(t, 3, p, func(i int, c *Config) {
		if i == 2 {
			// A stranger consistent in itself (its certificate of its own CA), so that it passes
			// its own check at start (auth.CheckRaftCertificate) and meets the cluster's refusal.
			c.TLS.Raft = p.coordinatorTLS(c.NodeID, p.other).Raft
			c.TLS.Raft.CA = p.otherCAFile
		}
	})
	good, stranger := c.nodes[:2], c.nodes[2]
	eventually(t, 20*time.Second, "a leader of c1 and c2 with both registered", func() bool {
		for _, n := range good {
			if t := n.currentTerm(); t != nil && t.isReady() && len(registeredIDs(n)) == 2 {
				return true
			}
		}
		return false
	})
	// Give the stranger several election timeouts to join if it could.
	time.Sleep(4 * stranger.cfg.ElectionTimeout)
	if regs := registeredIDs(stranger); len(regs) != 0 {
		t.Fatalf("the node with a Raft certificate of another CA received the replicated state: %v", regs)
	}
	if stranger.IsLeader() {
		t.Fatal("the node with a Raft certificate of another CA leads")
	}
	if id, _ := stranger.Leader(); id != "" {
		t.Fatalf("the node with a Raft certificate of another CA follows %s", id)
	}
}

func registeredIDs(n *Node) []string {
	var out []string
	n.fsm.View(func(s *fsm.State, _ uint64) {
		for id := range s.Coordinators {
			out = append(out, id)
		}
	})
	return out
}

func TestRaftPeerVerifiedOnlyForRaftCertificates(t *testing.T) {
	p := newPKI(t)
	c := newTLSCluster(t, 1, p, nil)
	n := c.leader()
	// A server with the admin port's TLS configuration whose handler asks raftPeerVerified.
	url := serveHTTPS(t, n.tls.Admin, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, n.raftPeerVerified(r))
	}))

	ask := func(cert *tlstest.Leaf) (string, error) {
		cfg := &tls.Config{RootCAs: p.raftCA.Pool(), ServerName: "127.0.0.1"}
		if cert != nil {
			cfg.GetClientCertificate = presenting(cert)
		}
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 5 * time.Second}
		resp, err := client.Post(url+admin.PathRegister, "application/json", strings.NewReader("{}"))
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return b.String(), nil
	}
	for _, tc := range []struct {
		name string
		cert *tlstest.Leaf
		want string
	}{
		{"raft certificate", p.raftCA.Issue(tlstest.Options{CommonName: "c9"}), "true"},
		{"worker certificate", p.workerCA.Issue(tlstest.Options{}), "false"},
		{"no certificate", nil, "false"},
	} {
		got, err := ask(tc.cert)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got != tc.want {
			t.Errorf("%s: raftPeerVerified %s, want %s", tc.name, got, tc.want)
		}
	}
	if _, err := ask(p.other.Issue(tlstest.Options{})); err == nil {
		t.Error("a client certificate of another CA passed the admin port's handshake")
	}
	plain := httptest.NewRequest(http.MethodPost, admin.PathRegister, nil)
	if n.raftPeerVerified(plain) {
		t.Error("a plain request counts as a coordinator")
	}
}

// serveHTTPS serves h on loopback with cfg as it is (httptest's StartTLS would put its own
// certificate first) and returns the server's URL.
func serveHTTPS(t testing.TB, cfg *tls.Config, h http.Handler) string {
	t.Helper()
	ln := listenLoopback(t)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(tls.NewListener(ln, cfg)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "https://" + ln.Addr().String()
}

func TestPeerCallsExplainAProtocolMismatch(t *testing.T) {
	p := newPKI(t)
	tlsNode, err := New(Config{TLS: p.coordinatorTLS("c1", p.raftCA)})
	if err != nil {
		t.Fatal(err)
	}
	plainNode, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	plainSrv := httptest.NewServer(http.NotFoundHandler())
	defer plainSrv.Close()
	tlsURL := serveHTTPS(t, tlsNode.tls.Admin, http.NotFoundHandler())

	plainAddr := strings.TrimPrefix(plainSrv.URL, "http://")
	resp, err := tlsNode.peerHTTPClient(5 * time.Second).Get(tlsNode.peerURL(plainAddr, admin.PathRing))
	if resp != nil {
		resp.Body.Close()
	}
	if got := tlsNode.explainPeerHTTP(plainAddr, resp, err); got == nil || !strings.Contains(got.Error(), "answers plain HTTP") {
		t.Errorf("https to a plain port: %v", got)
	}
	tlsAddr := strings.TrimPrefix(tlsURL, "https://")
	resp, err = plainNode.peerHTTPClient(5 * time.Second).Get(plainNode.peerURL(tlsAddr, admin.PathRing))
	if resp != nil {
		resp.Body.Close()
	}
	if got := plainNode.explainPeerHTTP(tlsAddr, resp, err); got == nil || !strings.Contains(got.Error(), "it has TLS on") {
		t.Errorf("plain HTTP to an https port: %v", got)
	}
}

func TestSilentClientCannotHoldATLSHandshake(t *testing.T) {
	p := newPKI(t)
	c := newTLSCluster(t, 1, p, nil)
	n := c.leader()
	conn, err := net.Dial("tcp", n.RSocketAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Send nothing: the coordinator must close the connection (within its silence timeout).
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 1)
	if _, err := conn.Read(buf); err == nil {
		t.Fatal("the coordinator sent something to a silent client")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the coordinator kept a silent client's connection open")
	}
}

func TestBadTLSConfigIsOneClearError(t *testing.T) {
	p := newPKI(t)
	good := p.coordinatorTLS("c1", p.raftCA)
	for name, tc := range map[string]struct {
		tls  auth.TLS
		want string
	}{
		"missing certificate": {auth.TLS{Server: tlsfiles.Files{Cert: "/nope.crt", Key: good.Server.Key}}, "/nope.crt"},
		"client CA alone":     {auth.TLS{Server: tlsfiles.Files{CA: p.workerCAFile}}, "--tls-client-ca needs --tls-cert"},
		"raft without CA":     {auth.TLS{Raft: tlsfiles.Files{Cert: good.Raft.Cert, Key: good.Raft.Key}}, "--raft-tls-ca together"},
		"garbage raft CA":     {auth.TLS{Raft: tlsfiles.Files{Cert: good.Raft.Cert, Key: good.Raft.Key, CA: good.Raft.Key}}, "holds no PEM certificate"},
		"binding without mutual TLS": {auth.TLS{Server: tlsfiles.Files{Cert: good.Server.Cert, Key: good.Server.Key}, RequireWorkerBinding: true},
			"needs mutual TLS"},
	} {
		_, err := New(Config{TLS: tc.tls})
		if err == nil || !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line saying %q", name, err, tc.want)
		}
	}
}
