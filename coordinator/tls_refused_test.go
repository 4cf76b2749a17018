//go:build !race

package coordinator

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/internal/tlsfiles"
	"github.com/retryring/retryring/testkit/tlstest"
)

// The tests of this file connect real lease clients that the coordinator refuses at SETUP (bad
// certificates, unbound worker ids). rsocket-go v0.8.16's client closes its connection on a
// REJECTED_SETUP while the lease client's first demand is being written on another goroutine: a
// data race inside the library (DuplexConnection.Close against sendFrame) that -race reports now
// and then. They run without -race, on their own line of `make test`, like the flood and the fleet
// failover tests.

func TestTLSRefusesBadClientsWithOneClearError(t *testing.T) {
	p := newPKI(t)
	c := newTLSCluster(t, 1, p, nil)
	leader := c.leader()
	addrs := []string{leader.RSocketAddr()}
	past := time.Now().Add(-48 * time.Hour)
	expired := p.workerCA.Issue(tlstest.Options{NotBefore: past, NotAfter: past.Add(24 * time.Hour)})
	otherTrust, err := tlsfiles.Client(tlsfiles.Files{CA: p.otherCAFile}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	otherTrust.GetClientCertificate = presenting(p.workerCA.Issue(tlstest.Options{}))

	for _, tc := range []struct {
		name string
		cfg  *tls.Config
		want string
	}{
		{"plain client", nil, "requires TLS: give the worker --coordinator-ca"},
		{"certificate of another CA", p.workerTLS(t, p.other.Issue(tlstest.Options{})),
			"the coordinator refused this worker's client certificate (--coordinator-cert): it does not trust the CA that signed the certificate (remote error: tls: unknown certificate authority)"},
		{"expired certificate", p.workerTLS(t, expired),
			"the coordinator refused this worker's client certificate (--coordinator-cert): it found the certificate expired or not yet valid (remote error: tls: expired certificate)"},
		{"no certificate", p.workerTLS(t, nil),
			"the coordinator requires a client certificate: give the worker --coordinator-cert and --coordinator-key (remote error: tls: certificate required)"},
		{"coordinator of an untrusted CA", otherTrust, "certificate signed by unknown authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := startTLSClient(t, "orders-1", tc.cfg, addrs)
			line := w.refusal(t, tc.want)
			t.Logf("worker log: %s", line)
			if w.leases.Load() != 0 {
				t.Fatal("a refused client got a lease")
			}
		})
	}
	if members := ringMembers(leader); len(members) != 0 {
		t.Fatalf("refused clients became members: %v", members)
	}
}

func TestCertificateBindsWorkerIDsByPrefix(t *testing.T) {
	p := newPKI(t)
	c := newTLSCluster(t, 1, p, nil)
	leader := c.leader()
	addrs := []string{leader.RSocketAddr()}
	bound := p.workerTLS(t, p.workerCA.Issue(tlstest.Options{CommonName: "orders", URIs: []string{WorkerIDPrefixURI + "orders-"}}))

	stateBefore, indexBefore := stateOf(t, leader)
	refused := startTLSClient(t, "payments-1", bound, addrs)
	line := refused.refusal(t, "unauthorized")
	if !strings.Contains(line, `binds worker ids starting with [\"orders-\"]; worker_id \"payments-1\" is not one of them`) {
		t.Fatalf("refusal does not say why: %s", line)
	}
	refused.refusal(t, "REJECTED_SETUP")
	stateAfter, indexAfter := stateOf(t, leader)
	if stateAfter != stateBefore || indexAfter != indexBefore {
		t.Fatalf("a refused client changed the replicated state:\nbefore (index %d) %s\nafter (index %d) %s", indexBefore, stateBefore, indexAfter, stateAfter)
	}
	if refused.leases.Load() != 0 {
		t.Fatal("the refused client got a lease")
	}

	admitted := startTLSClient(t, "orders-7", bound, addrs)
	eventually(t, 15*time.Second, "a lease for orders-7", func() bool { return admitted.leases.Load() > 0 })
	if members := ringMembers(leader); len(members) != 1 || members[0] != "orders-7" {
		t.Fatalf("members %v, want only orders-7", members)
	}
}

func TestWorkerBindingRequiredRefusesUnboundCertificates(t *testing.T) {
	p := newPKI(t)
	c := newTLSCluster(t, 1, p, func(_ int, c *Config) { c.TLS.RequireWorkerBinding = true })
	leader := c.leader()
	w := startTLSClient(t, "orders-1", p.workerTLS(t, p.workerCA.Issue(tlstest.Options{CommonName: "anyone"})), []string{leader.RSocketAddr()})
	w.refusal(t, "binds no worker id")
	if members := ringMembers(leader); len(members) != 0 {
		t.Fatalf("an unbound certificate became a member: %v", members)
	}
}

func TestTLSWorkerAgainstAPlainCoordinatorSaysSo(t *testing.T) {
	p := newPKI(t)
	c := newCluster(t, 1, nil)
	leader := c.leader()
	w := startTLSClient(t, "orders-1", p.workerTLS(t, nil), []string{leader.RSocketAddr()})
	w.refusal(t, "is TLS on at the coordinator")
}
