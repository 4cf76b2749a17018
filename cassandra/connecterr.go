package cassandra

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gocql/gocql"
)

// ConnectError is a failed Connect, said in one line: which node and what is wrong with it. It
// unwraps to ErrLogin or ErrTLS when it is one of those, and to the driver's own error.
type ConnectError struct {
	// Host is the node the reason is about (host:port), or the contact points.
	Host string
	// Reason says what is wrong, in words meant for the person who runs the command.
	Reason string
	// Kind is ErrLogin, ErrTLS or nil.
	Kind error
	// Err is the driver's error.
	Err error
}

// Error is the one line: "cassandra: connect to HOST: REASON".
func (e *ConnectError) Error() string {
	return "cassandra: connect to " + e.Host + ": " + e.Reason
}

// Unwrap gives Kind (when set) and the driver's error to errors.Is and errors.As.
func (e *ConnectError) Unwrap() []error {
	if e.Kind == nil {
		return []error{e.Err}
	}
	return []error{e.Kind, e.Err}
}

// maxConnectErrors bounds what connectErrors keeps: the observer stays on the session after
// Connect, and a node that flaps for days must not grow it.
const maxConnectErrors = 16

// connectErrors is a gocql.ConnectObserver that keeps the errors of the first failed
// connection attempts. gocql's CreateSession flattens its cause with %v, so the certificate,
// TLS alert or login error is only still an error value here.
type connectErrors struct {
	mu   sync.Mutex
	errs []observedError
}

type observedError struct {
	host string
	err  error
}

func (o *connectErrors) ObserveConnect(c gocql.ObservedConnect) {
	if c.Err == nil {
		return
	}
	host := ""
	if c.Host != nil {
		host = c.Host.HostnameAndPort()
	}
	o.mu.Lock()
	if len(o.errs) < maxConnectErrors {
		o.errs = append(o.errs, observedError{host, c.Err})
	}
	o.mu.Unlock()
}

// explain turns the failure of CreateSession into one line: the most telling error a node gave
// (a login or TLS problem before a plain network error), else the driver's own message.
func (o *connectErrors) explain(c Config, final error) error {
	o.mu.Lock()
	errs := append([]observedError(nil), o.errs...)
	o.mu.Unlock()
	var first *ConnectError
	for _, e := range errs {
		ce := describe(c, e.host, e.err)
		if ce.Kind != nil {
			return ce
		}
		if first == nil {
			first = ce
		}
	}
	if first != nil {
		return first
	}
	return &ConnectError{Host: strings.Join(c.Hosts, ","), Reason: oneLine(final.Error()), Err: final}
}

// describe says in one line what err, met while connecting to host, means.
func describe(c Config, host string, err error) *ConnectError {
	ce := &ConnectError{Host: host, Err: err}
	var (
		reqErr    gocql.RequestError
		recordErr tls.RecordHeaderError
		verifyErr *tls.CertificateVerificationError
		opErr     *net.OpError
	)
	switch {
	case errors.As(err, &reqErr) && reqErr.Code() == gocql.ErrCodeCredentials:
		ce.Kind, ce.Reason = ErrLogin, fmt.Sprintf("login as %q refused: %s", c.Username, oneLine(reqErr.Message()))
	case strings.HasPrefix(err.Error(), "authentication required"):
		// gocql's own words when a node asks for a login and no username was given.
		ce.Kind, ce.Reason = ErrLogin, "the node requires a login (PasswordAuthenticator) and no username was given"
	case errors.As(err, &recordErr):
		ce.Kind, ce.Reason = ErrTLS, "the node does not speak TLS on this port (its answer is not a TLS record): its client encryption is off, or this is another port"
	case errors.As(err, &verifyErr):
		ce.Kind, ce.Reason = ErrTLS, describeVerify(c, verifyErr)
	case errors.As(err, &opErr) && opErr.Op == "remote error":
		// A TLS alert from the node (crypto/tls reports alerts as *net.OpError "remote error").
		ce.Kind, ce.Reason = ErrTLS, describeAlert(c, opErr.Err)
	case !c.TLSEnabled() && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)):
		// A node whose client encryption is not optional drops a plain-text STARTUP frame.
		ce.Kind, ce.Reason = ErrTLS, "the node closed the connection at the first CQL frame: it probably requires TLS (client_encryption_options enabled, optional: false); give its CA"
	default:
		ce.Reason = oneLine(err.Error())
	}
	return ce
}

func describeVerify(c Config, e *tls.CertificateVerificationError) string {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	switch {
	case errors.As(e.Err, &unknown):
		by := "any CA of the system roots (no CA file given)"
		if c.TLS.CA != "" {
			by = "the CA in " + c.TLS.CA
		}
		subject, issuer := "", ""
		if unknown.Cert != nil {
			subject, issuer = unknown.Cert.Subject.String(), unknown.Cert.Issuer.String()
		}
		return fmt.Sprintf("the node's certificate (%s, issued by %s) is not signed by %s", subject, issuer, by)
	case errors.As(e.Err, &hostname):
		names := append([]string(nil), hostname.Certificate.DNSNames...)
		for _, ip := range hostname.Certificate.IPAddresses {
			names = append(names, ip.String())
		}
		if c.ServerName != "" {
			return fmt.Sprintf("the node's certificate is for %s, not for the server name %q", strings.Join(names, ", "), hostname.Host)
		}
		return fmt.Sprintf("the node's certificate is for %s, not for %q, the address dialled: set the server name to one of its names", strings.Join(names, ", "), hostname.Host)
	case errors.As(e.Err, &invalid) && invalid.Reason == x509.Expired && invalid.Cert != nil:
		if invalid.Cert.NotBefore.After(time.Now()) {
			return fmt.Sprintf("the node's certificate (%s) is not valid before %s", invalid.Cert.Subject, invalid.Cert.NotBefore.UTC().Format(time.RFC3339))
		}
		return fmt.Sprintf("the node's certificate (%s) expired at %s", invalid.Cert.Subject, invalid.Cert.NotAfter.UTC().Format(time.RFC3339))
	default:
		return "the node's certificate failed verification: " + oneLine(e.Err.Error())
	}
}

func describeAlert(c Config, alert error) string {
	name := strings.TrimPrefix(alert.Error(), "tls: ")
	switch {
	case name == "certificate required":
		return "the node requires a client certificate (require_client_auth) and none was given"
	case c.TLS.Cert != "":
		// Cassandra answers a client certificate it cannot verify with whichever alert its TLS
		// stack picks ("internal error" and "bad certificate" have both been seen).
		return fmt.Sprintf("the node refused the TLS handshake (alert %q): it probably does not accept the client certificate %s; is it signed by a CA in the node's truststore, and valid now?", name, c.TLS.Cert)
	default:
		return fmt.Sprintf("the node refused the TLS handshake (alert %q)", name)
	}
}

// oneLine keeps a driver or server message on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// maxHeldLogLines bounds what heldLogger keeps while a session is being opened.
const maxHeldLogLines = 100

// heldLogger holds gocql's log lines while Connect runs: when the connect fails, ConnectError
// already says why in one line and the driver's lines ("unable to dial control conn ...") would
// only repeat it; when it succeeds, they are passed on (a contact point that failed while
// another answered is worth a line).
type heldLogger struct {
	mu      sync.Mutex
	holding bool
	lines   []string
	to      gocql.StdLogger // nil: gocql's global logger
}

func newHeldLogger(to gocql.StdLogger) *heldLogger { return &heldLogger{holding: true, to: to} }

// next is the logger lines go to: the one given, else gocql's global one, looked up when a line
// is printed.
func (l *heldLogger) next() gocql.StdLogger {
	if l.to != nil {
		return l.to
	}
	return gocql.Logger
}

func (l *heldLogger) hold(line string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.holding {
		return false
	}
	if len(l.lines) < maxHeldLogLines {
		l.lines = append(l.lines, line)
	}
	return true
}

// release stops holding; the held lines are printed when pass is true and dropped otherwise.
func (l *heldLogger) release(pass bool) {
	l.mu.Lock()
	lines := l.lines
	l.holding, l.lines = false, nil
	l.mu.Unlock()
	if pass {
		for _, line := range lines {
			l.next().Print(line)
		}
	}
}

func (l *heldLogger) Print(v ...interface{}) {
	if line := fmt.Sprint(v...); !l.hold(line) {
		l.next().Print(line)
	}
}

func (l *heldLogger) Printf(format string, v ...interface{}) {
	if line := fmt.Sprintf(format, v...); !l.hold(line) {
		l.next().Print(line)
	}
}

func (l *heldLogger) Println(v ...interface{}) {
	if line := strings.TrimSuffix(fmt.Sprintln(v...), "\n"); !l.hold(line) {
		l.next().Print(line)
	}
}
