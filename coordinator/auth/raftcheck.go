package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/retryring/retryring/internal/tlsfiles"
)

// CheckRaftCertificate checks this node's Raft certificate at start the way the other
// coordinators will: signed by the Raft CA (--raft-tls-ca), valid now, usable as a server and as a
// client certificate, and naming the host of the advertised Raft address, by which the others
// dial and verify it. (An expired certificate is refused as NewSetup loads it, by tlsfiles.)
// Before, each of these mistakes showed only on the other nodes, or here as a
// "msgpack decode error ... remote error: tls: unknown certificate authority" from Raft.
func CheckRaftCertificate(files tlsfiles.Files, advertised string, now time.Time) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("Raft TLS: --raft-tls-cert %s %s", files.Cert, fmt.Sprintf(format, args...))
	}
	pair, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		return fmt.Errorf("Raft TLS: %w", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return bad("does not parse: %v", err)
	}
	roots, err := tlsfiles.Pool(files.CA)
	if err != nil {
		return fmt.Errorf("Raft TLS: %w", err)
	}
	intermediates := x509.NewCertPool()
	for _, der := range pair.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			intermediates.AddCert(c)
		}
	}
	verify := func(usage x509.ExtKeyUsage) error {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, CurrentTime: now,
			KeyUsages: []x509.ExtKeyUsage{usage}})
		return err
	}
	var unknown x509.UnknownAuthorityError
	switch err := verify(x509.ExtKeyUsageAny); {
	case err == nil:
	case errors.As(err, &unknown):
		return bad("is not signed by --raft-tls-ca %s (its issuer is %q): the other coordinators would refuse it; sign it with the Raft CA, or give that CA",
			files.CA, leaf.Issuer.String())
	default:
		return bad("does not verify against --raft-tls-ca %s: %v", files.CA, err)
	}
	for usage, role := range map[x509.ExtKeyUsage]string{x509.ExtKeyUsageServerAuth: "server (serverAuth)", x509.ExtKeyUsageClientAuth: "client (clientAuth)"} {
		if err := verify(usage); err != nil {
			return bad("is not usable as a %s certificate (%v): a coordinator's Raft certificate is both", role, err)
		}
	}
	host, _, err := net.SplitHostPort(advertised)
	if err != nil {
		host = advertised
	}
	if err := leaf.VerifyHostname(host); err != nil {
		return bad("does not name %s, the host of this node's raft address %s, by which the other coordinators dial and verify it (it names %s): add it to the certificate's SANs",
			host, advertised, certificateNames(leaf))
	}
	return nil
}

// certificateNames lists a certificate's SANs as an operator reads them.
func certificateNames(c *x509.Certificate) string {
	var names []string
	for _, d := range c.DNSNames {
		names = append(names, "DNS:"+d)
	}
	for _, ip := range c.IPAddresses {
		names = append(names, "IP:"+ip.String())
	}
	if len(names) == 0 {
		return "no DNS or IP name"
	}
	return strings.Join(names, ", ")
}
