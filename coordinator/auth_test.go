package coordinator

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsocket/rsocket-go/core/framing"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/internal/tlsfiles"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/authtest"
)

// authCluster is three coordinators sharing the auth files of dir.
func authCluster(t *testing.T, dir string, mutate func(c *Config)) *testCluster {
	t.Helper()
	return newCluster(t, 3, func(_ int, c *Config) {
		c.WorkerTokensFile = filePath(dir, "workers.yaml")
		c.AdminTokenFile = filePath(dir, "admins.yaml")
		c.ClusterSecretFile = filePath(dir, "secret")
		if mutate != nil {
			mutate(c)
		}
	})
}

func writeStandardAuth(t *testing.T, dir string, workerLines ...string) {
	t.Helper()
	authtest.ReplaceFile(t, filePath(dir, "workers.yaml"), "# test tokens\n"+strings.Join(workerLines, ""))
	authtest.ReplaceFile(t, filePath(dir, "admins.yaml"), tokenLine(lease.RingKey{}, tokAdmin))
	authtest.ReplaceFile(t, filePath(dir, "secret"), clusterSec+"\n")
}

// reloadAll makes every live node re-read its auth files now (the nodes also do it every second).
func (c *testCluster) reloadAll() {
	for _, n := range c.nodes {
		if !n.isClosed() {
			_ = n.auth.Reload()
		}
	}
}

// TestInvariant11BadCredentialsHoldNothingWriteNothingTakeNoID: with worker tokens on, clients
// without a valid token for the ring (none, a wrong one, another ring's, a revoked one) are refused
// at SETUP by every node, even under the id of a connected worker; the replicated state does not
// move (same applied index, same members), and the real worker keeps its lease under its id.
func TestInvariant11BadCredentialsHoldNothingWriteNothingTakeNoID(t *testing.T) {
	dir := authDir(t)
	const tokRevoked = "revoked-token-00000000000001"
	writeStandardAuth(t, dir, tokenLine(testRing, tokOrders), tokenLine(otherRing, tokOther), tokenLine(testRing, tokRevoked))
	c := authCluster(t, dir, nil)
	leader := c.leader()

	w := startRealWorker(t, "w1", testRing, tokOrders, c.rsocketAddrs())
	eventually(t, 15*time.Second, "the real worker holds a lease", w.holds)
	// The revoked token was valid until now: it is removed from the file.
	writeStandardAuth(t, dir, tokenLine(testRing, tokOrders), tokenLine(otherRing, tokOther))
	c.reloadAll()
	// Let the ring settle: nothing is committed while one worker holds the whole ring. Settled is
	// two renewals of the worker without a commit, however long a busy machine takes to get there
	// (a fixed wait could end with a commit still to come, which the check below would blame on
	// the refused clients).
	var index0 uint64
	var state0 string
	eventually(t, 30*time.Second, "two renewals of the real worker without a commit", func() bool {
		i, s := appliedState(leader)
		e := w.elements.Load()
		eventually(t, 10*time.Second, "two renewals of the real worker", func() bool { return w.elements.Load() >= e+2 })
		index0, state0 = appliedState(leader)
		return index0 == i && state0 == s
	})
	elements0 := w.elements.Load()

	attempts := []struct{ name, token string }{
		{"no token", ""}, {"wrong token", "not-a-valid-token-at-all-000"},
		{"another ring's token", tokOther}, {"revoked token", tokRevoked},
	}
	for _, n := range c.nodes {
		for _, a := range attempts {
			// The id of the real worker: a success would supersede it (duplicate_connection).
			conn := rawSetup(t, n.RSocketAddr(), "w1", testRing, a.token)
			we := expectRejected(t, conn, lease.CodeUnauthorized)
			if !conn.closedWithin(5 * time.Second) {
				t.Errorf("%s at %s: the connection stayed open after REJECTED_SETUP", a.name, n.cfg.NodeID)
			}
			t.Logf("%s at %s: %s", a.name, n.cfg.NodeID, we.Message)
		}
	}
	var refused uint64
	for _, n := range c.nodes {
		refused += refusals(n, refusedUnauthorized)
	}
	if want := uint64(len(attempts) * len(c.nodes)); refused != want {
		t.Errorf("unauthorized refusals counted %d, want %d", refused, want)
	}

	// The real worker goes on being renewed under its id.
	eventually(t, 10*time.Second, "two more renewals of the real worker", func() bool { return w.elements.Load() >= elements0+2 })
	if !w.holds() {
		t.Error("the real worker lost its lease")
	}
	index1, state1 := appliedState(leader)
	if index1 != index0 || state1 != state0 {
		t.Errorf("refused clients changed the replicated state:\n applied %d -> %d\n %s\n %s", index0, index1, state0, state1)
	}
}

// TestRotationEndsTheRevokedTokensStream: two tokens of a ring are valid and a worker uses each;
// the old one is removed from the file. The old token's stream ends at its next renewal with
// unauthorized and its connection closes (the member goes down as after a disconnect and cannot
// come back with that token); the new token's worker keeps its lease and ends up with the whole
// ring. The revoked worker speaks raw frames, so that the test reads exactly what it is sent.
func TestRotationEndsTheRevokedTokensStream(t *testing.T) {
	dir := authDir(t)
	writeStandardAuth(t, dir, tokenLine(testRing, tokOrders), tokenLine(testRing, tokOrdersNew))
	c := authCluster(t, dir, nil)
	leader := c.leader()

	renewed := startRealWorker(t, "new", testRing, tokOrdersNew, c.rsocketAddrs())
	old := rawSetup(t, leader.RSocketAddr(), "old", testRing, tokOrders)
	var writeMu sync.Mutex
	write := func(b []byte) {
		writeMu.Lock()
		defer writeMu.Unlock()
		_, _ = old.Write(b)
	}
	stopKeepalive := make(chan struct{})
	keepaliveDone := make(chan struct{})
	go func() { // the keepalives a live client sends, or the silence timeout would close it first
		defer close(keepaliveDone)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopKeepalive:
				return
			case <-tick.C:
				write(frameBytes(framing.NewWriteableKeepaliveFrame(0, nil, true)))
			}
		}
	}()
	defer func() { close(stopKeepalive); <-keepaliveDone }()

	// next reads the old worker's next element or error, asking for one more after an element.
	next := func() (*lease.WireError, bool) {
		t.Helper()
		f, err := old.next(10 * time.Second)
		if err != nil {
			t.Fatalf("the old token's stream: %v", err)
		}
		switch ff := f.(type) {
		case *framing.PayloadFrame:
			write(frameBytes(framing.NewWriteableRequestNFrame(1, 1, 0)))
			return nil, true
		case *framing.ErrorFrame:
			var we *lease.WireError
			if !errors.As(lease.FromWire(ff.ErrorData()), &we) {
				t.Fatalf("error frame %q", ff.ErrorData())
			}
			return we, false
		}
		return nil, false
	}
	if _, ok := next(); !ok {
		t.Fatal("the old token's worker got no element")
	}
	eventually(t, 15*time.Second, "the new token's worker holds a lease", renewed.holds)

	authtest.ReplaceFile(t, filePath(dir, "workers.yaml"), tokenLine(testRing, tokOrdersNew))
	// No reloadAll: the nodes' own one-second watch picks the change up.
	var we *lease.WireError
	for elements := 0; we == nil; elements++ {
		if elements > 20 {
			t.Fatal("the revoked token's stream went on for 20 elements")
		}
		we, _ = next()
	}
	if we.Code != lease.CodeUnauthorized {
		t.Fatalf("the revoked stream ended with %+v, want unauthorized", we)
	}
	if !old.closedWithin(5 * time.Second) {
		t.Error("the revoked token's connection stayed open")
	}
	if refusals(leader, refusedRevoked) != 1 {
		t.Errorf("revocations counted %d, want 1", refusals(leader, refusedRevoked))
	}
	eventually(t, 15*time.Second, "the old member departed and the new one holds the whole ring", func() bool {
		for _, r := range leader.View().Rings {
			ok := false
			for _, m := range r.Members {
				switch {
				case m.WorkerID == "old" && m.State == admin.MemberActive:
					return false
				case m.WorkerID == "new":
					ok = m.State == admin.MemberActive && admin.SharePercent(m.Ranges) == 100
				}
			}
			return ok
		}
		return false
	})
	if !renewed.holds() {
		t.Error("the worker with the new token lost its lease")
	}
	expectRejected(t, rawSetup(t, leader.RSocketAddr(), "old", testRing, tokOrders), lease.CodeUnauthorized)
}

// TestAdminBearerTokenAtTheEdge: a mutating admin call without a bearer token, or with a wrong
// one, is 401 on every node (a follower refuses before forwarding); the right token works through
// a follower (which forwards the header) and on the leader; reads need no token.
func TestAdminBearerTokenAtTheEdge(t *testing.T) {
	dir := authDir(t)
	writeStandardAuth(t, dir, tokenLine(testRing, tokOrders))
	c := authCluster(t, dir, nil)
	leader := c.leader()
	follower := c.followers(leader)[0]
	path := ringPath(testRing, admin.ActionPause)
	index0, _ := appliedState(leader)

	for _, n := range []*Node{follower, leader} {
		for name, h := range map[string]map[string]string{
			"no header":     nil,
			"wrong token":   {"Authorization": "bearer not-the-admin-token-0000"},
			"worker token":  {"Authorization": "Bearer " + tokOrders},
			"not a bearer":  {"Authorization": "Basic " + tokAdmin},
			"cluster token": {HeaderClusterSecret: clusterSec},
		} {
			status, challenge, body := httpDo(t, http.MethodPost, n.HTTPAddr(), path, `{"reason":"x"}`, h)
			var we lease.WireError
			if status != http.StatusUnauthorized || !strings.HasPrefix(challenge, "Bearer") ||
				json.Unmarshal([]byte(body), &we) != nil || we.Code != lease.CodeUnauthorized {
				t.Errorf("%s at %s: %d %q %s, want 401 Bearer unauthorized", name, n.cfg.NodeID, status, challenge, body)
			}
		}
	}
	if index1, _ := appliedState(leader); index1 != index0 {
		t.Errorf("refused admin calls moved the applied index %d -> %d", index0, index1)
	}
	if controlsOn(leader) != nil {
		t.Fatal("a refused pause was committed")
	}
	if status := getJSON(t, follower.HTTPAddr(), admin.PathRing, nil); status != http.StatusOK {
		t.Errorf("GET %s without a token: %d", admin.PathRing, status)
	}

	auth := map[string]string{"Authorization": "Bearer " + tokAdmin, "Content-Type": "application/json"}
	if status, _, body := httpDo(t, http.MethodPost, follower.HTTPAddr(), path, `{"reason":"through a follower"}`, auth); status != http.StatusOK {
		t.Fatalf("pause through a follower with the token: %d %s", status, body)
	}
	if ctl := controlsOn(leader); ctl == nil || !ctl.Paused {
		t.Fatalf("pause not committed: %+v", ctl)
	}
	resume := ringPath(testRing, admin.ActionResume)
	// The scheme is case-insensitive.
	lower := map[string]string{"Authorization": "bearer " + tokAdmin}
	if status, _, body := httpDo(t, http.MethodPost, leader.HTTPAddr(), resume, `{}`, lower); status != http.StatusOK {
		t.Fatalf("resume on the leader with the token: %d %s", status, body)
	}
	if refusals(leader, refusedAdmin)+refusals(follower, refusedAdmin) < 10 {
		t.Error("admin refusals were not counted")
	}
}

// TestInternalEndpointsNeedTheClusterSecret: the coordinators register with each other through
// the secret (the cluster forms); a registration without it, or with a wrong one, is 401 and
// changes nothing, even naming a voter of the configuration with an attacker's address; with the
// secret, a registration that changes nothing writes no Raft entry, and one out of bounds is 400.
func TestInternalEndpointsNeedTheClusterSecret(t *testing.T) {
	dir := authDir(t)
	writeStandardAuth(t, dir, tokenLine(testRing, tokOrders))
	c := authCluster(t, dir, nil)
	leader := c.leader() // every node registered: the secret went with each registration
	follower := c.followers(leader)[0]
	index0, state0 := appliedState(leader)

	hijack, _ := json.Marshal(fsm.Coordinator{ID: follower.cfg.NodeID, RaftAddr: follower.RaftAddr(),
		RSocketAddr: "203.0.113.9:7878", HTTPAddr: "203.0.113.9:7480", FSMVersion: fsm.Version})
	for name, h := range map[string]map[string]string{
		"no secret":    nil,
		"wrong secret": {HeaderClusterSecret: "cluster-secret-000000000000002"},
		"admin token":  {"Authorization": "Bearer " + tokAdmin},
	} {
		status, _, body := httpDo(t, http.MethodPost, leader.HTTPAddr(), admin.PathRegister, string(hijack), h)
		if status != http.StatusUnauthorized {
			t.Errorf("%s: register answered %d %s, want 401", name, status, body)
		}
	}
	if index1, state1 := appliedState(leader); index1 != index0 || state1 != state0 {
		t.Fatalf("refused registrations changed the state: %d -> %d\n%s\n%s", index0, index1, state0, state1)
	}
	if refusals(leader, refusedInternal) != 3 {
		t.Errorf("internal refusals %d, want 3", refusals(leader, refusedInternal))
	}

	secret := map[string]string{HeaderClusterSecret: clusterSec}
	same, _ := json.Marshal(follower.selfRegistration())
	if status, _, body := httpDo(t, http.MethodPost, leader.HTTPAddr(), admin.PathRegister, string(same), secret); status != http.StatusOK {
		t.Fatalf("an unchanged registration: %d %s", status, body)
	}
	if index1, _ := appliedState(leader); index1 != index0 {
		t.Errorf("an unchanged registration wrote a Raft entry: %d -> %d", index0, index1)
	}
	for name, reg := range map[string]fsm.Coordinator{
		"address not host:port": {ID: follower.cfg.NodeID, RSocketAddr: "nowhere", HTTPAddr: follower.HTTPAddr()},
		"address too long":      {ID: follower.cfg.NodeID, RSocketAddr: strings.Repeat("a", 300) + ":1", HTTPAddr: follower.HTTPAddr()},
		"negative version":      {ID: follower.cfg.NodeID, RSocketAddr: follower.RSocketAddr(), HTTPAddr: follower.HTTPAddr(), FSMVersion: -1},
		"not a voter":           {ID: "c9", RSocketAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2"},
	} {
		b, _ := json.Marshal(reg)
		if status, _, body := httpDo(t, http.MethodPost, leader.HTTPAddr(), admin.PathRegister, string(b), secret); status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", name, status, body)
		}
	}
	if index1, state1 := appliedState(leader); index1 != index0 || state1 != state0 {
		t.Errorf("bad registrations changed the state: %d -> %d", index0, index1)
	}
}

// TestAuthFilesThatBreakKeepTheLastGoodContent: a tokens file that becomes invalid or disappears
// keeps the tokens in force (a worker still connects); a valid change takes effect.
func TestAuthFilesThatBreakKeepTheLastGoodContent(t *testing.T) {
	dir := authDir(t)
	writeStandardAuth(t, dir, tokenLine(testRing, tokOrders))
	c := newCluster(t, 1, func(_ int, cfg *Config) {
		cfg.WorkerTokensFile, cfg.ClusterSecretFile = filePath(dir, "workers.yaml"), filePath(dir, "secret")
	})
	n := c.leader()

	authtest.ReplaceFile(t, filePath(dir, "workers.yaml"), "- {ring: eu/c1/orders, hash: plain-secret}\n")
	if err := n.auth.Reload(); err == nil || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("a plain secret in the file: %v", err)
	}
	expectAdmitted := func(token string) {
		t.Helper()
		conn := rawSetup(t, n.RSocketAddr(), "probe", testRing, token)
		if _, err := conn.next(5 * time.Second); err != nil {
			t.Fatalf("want a lease element: %v", err)
		}
		_ = conn.Close()
	}
	expectAdmitted(tokOrders)
	if err := n.auth.Reload(); err == nil {
		t.Fatal("the same broken file passed the second time")
	}

	authtest.ReplaceFile(t, filePath(dir, "workers.yaml"), tokenLine(testRing, tokOrdersNew))
	if err := n.auth.Reload(); err != nil {
		t.Fatal(err)
	}
	expectRejected(t, rawSetup(t, n.RSocketAddr(), "probe", testRing, tokOrders), lease.CodeUnauthorized)
}

// TestStartRefusesABadAuthFile: a missing or invalid file stops the node at Start, with an error
// naming the flag and the file.
func TestStartRefusesABadAuthFile(t *testing.T) {
	dir := authDir(t)
	writeStandardAuth(t, dir)
	authtest.ReplaceFile(t, filePath(dir, "bad.yaml"), "- {ring: eu/c1, hash: \"sha256:00\"}\n")
	secret := filePath(dir, "secret")
	for name, mutate := range map[string]func(*Config){
		"missing worker tokens": func(c *Config) { c.WorkerTokensFile, c.ClusterSecretFile = filePath(dir, "none.yaml"), secret },
		"bad worker tokens":     func(c *Config) { c.WorkerTokensFile, c.ClusterSecretFile = filePath(dir, "bad.yaml"), secret },
		"bad admin tokens":      func(c *Config) { c.AdminTokenFile, c.ClusterSecretFile = filePath(dir, "bad.yaml"), secret },
		"short cluster secret":  func(c *Config) { c.ClusterSecretFile = filePath(dir, "bad.yaml") },
	} {
		cfg := Config{NodeID: "c1", DataDir: t.TempDir(), NoSync: true, Logger: testLogger(t),
			RaftListener: listenLoopback(t), RSocketListener: listenLoopback(t), HTTPListener: listenLoopback(t)}
		mutate(&cfg)
		n, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = n.Start(t.Context())
		if err == nil {
			n.Kill()
			t.Errorf("%s: the node started", name)
			continue
		}
		if !strings.Contains(err.Error(), "--") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %q should be one line naming the flag", name, err)
		}
		t.Logf("%s: %v", name, err)
	}
}

// TestTokensNeedTheInternalEndpointsClosed: worker or admin tokens with /v1/internal/ open (no
// cluster secret, no Raft TLS identity on a TLS admin port) are refused at New: anyone could
// register a coordinator address that workers, and their tokens, get redirected to.
func TestTokensNeedTheInternalEndpointsClosed(t *testing.T) {
	dir := authDir(t)
	writeStandardAuth(t, dir)
	for name, mutate := range map[string]func(*Config){
		"worker tokens": func(c *Config) { c.WorkerTokensFile = filePath(dir, "workers.yaml") },
		"admin tokens":  func(c *Config) { c.AdminTokenFile = filePath(dir, "admins.yaml") },
		"raft TLS on a plain admin port": func(c *Config) {
			c.WorkerTokensFile = filePath(dir, "workers.yaml")
			c.TLS.Raft = tlsfiles.Files{Cert: "r.crt", Key: "r.key", CA: "ca.crt"}
		},
	} {
		cfg := Config{NodeID: "c1", DataDir: t.TempDir()}
		mutate(&cfg)
		if _, err := New(cfg); !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "--cluster-secret-file") {
			t.Errorf("%s: New answered %v, want a bad config naming --cluster-secret-file", name, err)
		}
	}
}
