package coordinator

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/internal/tlsfiles"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/tlstest"
	"github.com/retryring/retryring/worker/leaseclient"
)

// TestCheckCredentialsAgainstTLSCoordinator: the check a worker runs while it waits for Cassandra
// (leaseclient.CheckCredentials) gets, from a real coordinator with mutual TLS, the same words as
// a lease client would for each certificate mistake, as leaseclient.ErrRefused; a good
// certificate is admitted, and nothing joins the ring.
func TestCheckCredentialsAgainstTLSCoordinator(t *testing.T) {
	p := newPKI(t)
	c := newTLSCluster(t, 1, p, nil)
	leader := c.leader()
	otherTrust, err := tlsfiles.Client(tlsfiles.Files{CA: p.otherCAFile}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	otherTrust.GetClientCertificate = presenting(p.workerCA.Issue(tlstest.Options{}))
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
		want string // "" for admitted
	}{
		{"good certificate", p.workerTLS(t, p.workerCA.Issue(tlstest.Options{})), ""},
		{"certificate of another CA", p.workerTLS(t, p.other.Issue(tlstest.Options{})),
			"the coordinator refused this worker's client certificate (--coordinator-cert): it does not trust the CA that signed the certificate"},
		{"no certificate", p.workerTLS(t, nil),
			"the coordinator requires a client certificate: give the worker --coordinator-cert and --coordinator-key"},
		{"coordinator of an untrusted CA", otherTrust, "this worker does not trust the certificate of the coordinator at " + leader.RSocketAddr() +
			" (--coordinator-ca): leaseclient: connection lost: connecting to " + leader.RSocketAddr() + ": TLS handshake with " + leader.RSocketAddr() +
			": tls: failed to verify certificate: x509: certificate signed by unknown authority"},
		{"plain client", nil, "requires TLS: give the worker --coordinator-ca"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := leaseclient.New(leaseclient.Config{WorkerID: "orders-1", Ring: lease.RingKey{Region: "eu", Cluster: "c1", Service: "orders"},
				Coordinators: []string{leader.RSocketAddr()}, TLS: tc.cfg})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err = cl.CheckCredentials(ctx)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("admitted certificate: %v", err)
			case tc.want != "" && (!errors.Is(err, leaseclient.ErrRefused) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("%v; want ErrRefused saying %q", err, tc.want)
			}
			t.Logf("check: %v", err)
		})
	}
	if members := ringMembers(leader); len(members) != 0 {
		t.Fatalf("the checks joined the ring: %v", members)
	}
}
