package tlsfiles

import (
	"crypto/tls"
	"errors"
	"net"
)

// TLS alerts (RFC 8446 section 6.2) by which a server refuses the client's certificate. A client
// receives them only about its own certificate: its verdict on the server's is its own error.
const (
	alertBadCertificate         tls.AlertError = 42
	alertUnsupportedCertificate tls.AlertError = 43
	alertCertificateRevoked     tls.AlertError = 44
	alertCertificateExpired     tls.AlertError = 45
	alertCertificateUnknown     tls.AlertError = 46
	alertUnknownCA              tls.AlertError = 48
	alertAccessDenied           tls.AlertError = 49
	alertCertificateRequired    tls.AlertError = 116
)

// refusalReasons say, for each such alert, what the server found wrong with the certificate.
var refusalReasons = map[tls.AlertError]string{
	alertBadCertificate:         "it found the certificate unusable",
	alertUnsupportedCertificate: "it does not support the certificate's type",
	alertCertificateRevoked:     "the certificate was revoked",
	alertCertificateExpired:     "it found the certificate expired or not yet valid",
	alertCertificateUnknown:     "it could not verify the certificate",
	alertUnknownCA:              "it does not trust the CA that signed the certificate",
	alertAccessDenied:           "it denied access to the certificate's holder",
	alertCertificateRequired:    "it requires a client certificate and got none",
}

// CertificateRefusal reports whether err carries a TLS alert by which the server refused this
// client's certificate, and then what the server found wrong. crypto/tls reports such an alert as
// a *net.OpError of Op "remote error" around an unexported alert type whose text is that of
// tls.AlertError; under TLS 1.3 it arrives on the first read after the handshake, not from the
// handshake, so callers look for it wherever a connection failed.
func CertificateRefusal(err error) (reason string, required bool, ok bool) {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "remote error" || op.Err == nil {
		return "", false, false
	}
	var alert tls.AlertError
	if !errors.As(op.Err, &alert) {
		text := op.Err.Error()
		for a := range refusalReasons {
			if a.Error() == text {
				alert = a
			}
		}
	}
	reason, ok = refusalReasons[alert]
	return reason, alert == alertCertificateRequired, ok
}
