package coordinator

import (
	"github.com/retryring/retryring/coordinator/auth"

	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/internal/tlsfiles"
	"github.com/retryring/retryring/testkit/tlstest"
)

// A Raft certificate that the other coordinators would refuse stops this node at start, saying
// in words what is wrong with it.
func TestRaftCertificateCheckedAtStart(t *testing.T) {
	p := newPKI(t)
	past := time.Now().Add(-48 * time.Hour)
	for name, tc := range map[string]struct {
		leaf *tlstest.Leaf
		want func(cert string) string
	}{
		"another CA": {p.other.Issue(tlstest.Options{CommonName: "c1"}), func(cert string) string {
			return "Raft TLS: --raft-tls-cert " + cert + " is not signed by --raft-tls-ca " + p.raftCAFile +
				` (its issuer is "CN=other-ca"): the other coordinators would refuse it`
		}},
		"without the SAN": {p.raftCA.Issue(tlstest.Options{CommonName: "c1", DNS: []string{"c1.retryring.svc"}}), func(cert string) string {
			return "Raft TLS: --raft-tls-cert " + cert + " does not name 127.0.0.1, the host of this node's raft address 127.0.0.1:"
		}},
		// Refused as the files are loaded (New), in words as well.
		"expired": {p.raftCA.Issue(tlstest.Options{NotBefore: past, NotAfter: past.Add(24 * time.Hour)}), func(cert string) string {
			return "Raft TLS: tls: certificate " + cert + " expired at " + past.Add(24*time.Hour).UTC().Format(time.RFC3339)
		}},
	} {
		cert, key := tc.leaf.Write(p.dir, strings.ReplaceAll(name, " ", "-"))
		n, err := New(Config{NodeID: "c1", DataDir: t.TempDir(), NoSync: true, Logger: testLogger(t), Timing: testTiming,
			TLS:          auth.TLS{Raft: tlsfiles.Files{Cert: cert, Key: key, CA: p.raftCAFile}},
			RaftListener: listenLoopback(t), RSocketListener: listenLoopback(t), HTTPListener: listenLoopback(t)})
		if err == nil {
			if err = n.Start(context.Background()); err == nil {
				n.Kill()
			}
		}
		if want := tc.want(cert); !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line saying %q", name, err, want)
		}
	}
}

// A node whose certificate the others do not trust (its CA bundle trusts theirs, so its own check
// passes) hears their refusal as a TLS alert inside Raft's RPC: it says so in words, naming the
// peer and the reason, instead of Raft's "msgpack decode error".
func TestRaftCertificateRefusalIsLoggedInWords(t *testing.T) {
	p := newPKI(t)
	bundle := filepath.Join(p.dir, "raft-and-other-ca.crt")
	if err := os.WriteFile(bundle, append(append([]byte{}, p.raftCA.PEM...), p.other.PEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	c := newTLSCluster(t, 3, p, func(i int, c *Config) {
		if i == 2 {
			c.TLS.Raft = p.coordinatorTLS(c.NodeID, p.other).Raft
			c.TLS.Raft.CA = bundle
			c.Logger = zerolog.New(logs).Level(zerolog.WarnLevel)
		}
	})
	const msg = "Raft TLS: a coordinator refused this node's certificate (the others must trust the CA that signed it, in their --raft-tls-ca)"
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the stranger's log:\n%s", logs.String())
		}
	})
	eventually(t, 20*time.Second, "the stranger's line", func() bool { return slices.Contains(logs.messages(), msg) })
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, msg) {
			for _, want := range []string{`"reason":"it does not trust the CA that signed the certificate"`, `"peer_raft_addr":"127.0.0.1:`,
				`"raft_tls_cert":"` + c.nodes[2].cfg.TLS.Raft.Cert + `"`} {
				if !strings.Contains(l, want) {
					t.Errorf("line %s does not say %s", l, want)
				}
			}
			return
		}
	}
}
