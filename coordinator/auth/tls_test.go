package auth

import (
	"errors"
	"testing"

	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/tlstest"
)

// TestWorkerIDPrefixes: a worker certificate binds the ids its URI SANs of WorkerIDPrefixURI
// start; one that binds none is admitted unless bindings are required; a refusal is unauthorized.
func TestWorkerIDPrefixes(t *testing.T) {
	ca := tlstest.NewCA("ca")
	for _, tc := range []struct {
		uris     []string
		id       string
		required bool
		ok       bool
	}{
		{nil, "anything", false, true},
		{nil, "anything", true, false},
		{[]string{WorkerIDPrefixURI + "orders-"}, "orders-7", true, true},
		{[]string{WorkerIDPrefixURI + "orders-"}, "payments-1", false, false},
		{[]string{WorkerIDPrefixURI + "orders-", WorkerIDPrefixURI + "payments-"}, "payments-1", false, true},
		{[]string{WorkerIDPrefixURI}, "anything", true, true},
		{[]string{"urn:example:other"}, "anything", true, false},
		{[]string{"spiffe://cluster.local/ns/retry/sa/worker"}, "anything", false, true},
	} {
		cert := ca.Issue(tlstest.Options{URIs: tc.uris}).Cert
		err := CheckWorkerBinding(cert, tc.id, tc.required)
		if (err == nil) != tc.ok {
			t.Errorf("URIs %v, id %q, required %v: error %v, want ok=%v", tc.uris, tc.id, tc.required, err, tc.ok)
		}
		if err != nil && !errors.Is(err, lease.ErrUnauthorized) {
			t.Errorf("error %v is not unauthorized", err)
		}
	}
}
