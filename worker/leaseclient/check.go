package leaseclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/retryring/retryring/internal/tlsfiles"
	"github.com/retryring/retryring/lease"
)

// checkRefusalWait is how long CheckCredentials waits, after SETUP went out, for a REJECTED_SETUP
// before it sends its request: the coordinator answers a refused SETUP at once, and a request
// written while rsocket-go closes the connection on that answer races inside the library.
const checkRefusalWait = 300 * time.Millisecond

// CheckCredentials asks the coordinators whether they admit this client's SETUP (worker id, ring,
// token) and TLS (certificate, CA), without joining the ring: it connects to each address in turn
// with the SETUP that Run sends, waits for a REJECTED_SETUP or a TLS alert, then sends one
// ring.view (any answer, a not_leader included, proves the SETUP was admitted), and closes the
// connection. It never opens the lease stream, so no demand is sent and the coordinator neither
// joins the worker nor assigns it anything. A worker runs it while it waits for something else
// (Cassandra) and not while Run is connected: the coordinator keeps one connection per worker id,
// and this one would replace Run's.
//
// It returns nil when a coordinator admitted the SETUP; an error wrapping ErrRefused when one
// refused the token or the certificate, the worker did not trust the coordinator's certificate, or
// the TLS handshake failed otherwise (the error says which, naming the worker's flags where it
// can); and otherwise the last address's error (ErrDisconnected: no coordinator answered).
func (c *Client) CheckCredentials(ctx context.Context) error {
	var last error
	for _, addr := range c.cfg.Coordinators {
		err := c.checkOne(ctx, addr)
		if err == nil || errors.Is(err, ErrRefused) || ctx.Err() != nil {
			return err
		}
		last = err
	}
	return last
}

// checkOne runs CheckCredentials against one address.
func (c *Client) checkOne(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout+checkRefusalWait+c.cfg.RequestTimeout)
	defer cancel()
	// No KEEPALIVE before the connection closes: rsocket-go starts its keepalive ticker before it
	// dials, and when the dial takes longer than a period (a busy host, a TLS handshake) the first
	// KEEPALIVE is written while Start still writes the SETUP, a data race inside the library. The
	// check's own request is the coordinator's sign of life within its silence timeout.
	sess, err := c.dialKeepalive(ctx, addr, c.cfg.DialTimeout+checkRefusalWait+c.cfg.RequestTimeout)
	if err != nil {
		return classifyCheck(addr, err)
	}
	defer sess.close()
	t := time.NewTimer(checkRefusalWait)
	defer t.Stop()
	select {
	case <-sess.closed:
		return classifyCheck(addr, sess.withTLSAlert(sess.err()))
	case <-ctx.Done():
		return fmt.Errorf("%w: checking the credentials at %s: %w", ErrDisconnected, addr, ctx.Err())
	case <-t.C:
	}
	_, err = sess.call(ctx, lease.RouteView, struct{}{})
	if err == nil {
		return nil
	}
	var we *lease.WireError
	if errors.As(err, &we) && we.Code != lease.CodeUnauthorized && we.Code != lease.CodeBadSetup {
		return nil // a request-level answer (not_leader, no_leader, busy): the SETUP was admitted
	}
	select {
	case <-sess.closed: // the coordinator's reason for closing beats the request's error
		return classifyCheck(addr, sess.withTLSAlert(sess.err()))
	default:
		return classifyCheck(addr, err)
	}
}

// classifyCheck wraps err in ErrRefused when it is an answer that no retry will change until the
// configuration does: a refused token or SETUP, a certificate refused either way, or a handshake
// that failed for TLS reasons.
func classifyCheck(addr string, err error) error {
	var (
		verify  *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
	)
	switch {
	case errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &host):
		return &refusal{msg: "this worker does not trust the certificate of the coordinator at " + addr + " (--coordinator-ca): " + err.Error(), err: err}
	case refusedCredentials(err):
		return &refusal{msg: "the coordinator at " + addr + " refused this worker's credentials: " + err.Error(), err: err}
	}
	return err
}

// refusal is an ErrRefused that says who refused what.
type refusal struct {
	msg string
	err error
}

func (r *refusal) Error() string { return r.msg }

func (r *refusal) Unwrap() []error { return []error{ErrRefused, r.err} }

func refusedCredentials(err error) bool {
	var record tls.RecordHeaderError
	if anyInTree(err, func(e error) bool { _, _, ok := tlsfiles.CertificateRefusal(e); return ok }) {
		return true
	}
	return errors.Is(err, lease.ErrUnauthorized) || errors.Is(err, lease.ErrBadSetup) || errors.As(err, &record) ||
		strings.Contains(err.Error(), "TLS handshake with ") || strings.Contains(err.Error(), "the coordinator refused the TLS connection")
}

// anyInTree reports whether match holds for err or any error it wraps. errors.As stops at the first
// error of a type, and a connection that failed carries several *net.OpError: the write that
// failed first, the TLS alert that says why after it.
func anyInTree(err error, match func(error) bool) bool {
	if err == nil {
		return false
	}
	if match(err) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return anyInTree(u.Unwrap(), match)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if anyInTree(e, match) {
				return true
			}
		}
	}
	return false
}
