package leaseclient

import (
	"errors"
	"net"
	"slices"
	"testing"

	"github.com/rsocket/rsocket-go"

	"github.com/retryring/retryring/lease"
)

// FuzzRemoteError feeds any error frame (code and data) to remoteError and the redial plan, as a
// coordinator's answer reaches them. An error frame the catalog's JSON may come in
// (APPLICATION_ERROR, REJECTED_SETUP, the other setup and request refusals) gives exactly one
// sentinel of lease/wire.go (ErrInternal when the data is not a WireError); any other code is
// ErrDisconnected. A redirect names an address; the coordinators a no_leader lists become at most
// maxLearnedAddrs host:port addresses, never a configured one twice; and the next attempt goes to
// the redirect or to an address of the list, after a delay within the backoff's bounds.
func FuzzRemoteError(f *testing.F) {
	for code, bodies := range map[rsocket.ErrorCode][]string{
		rsocket.ErrorCodeApplicationError: {
			`{"error":"not_leader","leader_id":"c2","leader_rsocket_addr":"10.0.0.2:7000"}`, `{"error":"not_leader"}`,
			`{"error":"no_leader","coordinators":[{"id":"c1","rsocket_addr":"10.0.0.1:7000"},{"id":"c2","rsocket_addr":"[::1]:7002"},{"id":"c3","rsocket_addr":"a:1"}]}`,
			`{"error":"no_leader","coordinators":"c1"}`, `{"error":"no_leader","coordinators":[1,2]}`,
			`{"error":"no_leader","coordinators":[{"id":"","rsocket_addr":":"},{"rsocket_addr":"h:"},{"id":"x","rsocket_addr":"10.0.0.1:7000"}]}`,
			`{"error":"duplicate_connection"}`, `{"error":"made_up"}`, `plain text`, ``,
		},
		rsocket.ErrorCodeRejectedSetup:    {`{"error":"bad_setup","message":"no ring"}`, `{"error":"unauthorized"}`},
		rsocket.ErrorCodeConnectionClose:  {`bye`},
		rsocket.ErrorCodeUnsupportedSetup: {`resume not supported`},
		rsocket.ErrorCodeCanceled:         {`{"error":"unavailable"}`},
	} {
		for _, b := range bodies {
			f.Add(uint32(code), []byte(b))
		}
	}
	sentinels := []error{lease.ErrNotLeader, lease.ErrNoLeader, lease.ErrBadRequest, lease.ErrUnknownRoute, lease.ErrBadSetup,
		lease.ErrDuplicate, lease.ErrUnavailable, lease.ErrUnknownWorker, lease.ErrUnauthorized, lease.ErrInternal}
	wireCodes := []rsocket.ErrorCode{rsocket.ErrorCodeApplicationError, rsocket.ErrorCodeRejectedSetup, rsocket.ErrorCodeInvalidSetup,
		rsocket.ErrorCodeUnsupportedSetup, rsocket.ErrorCodeRejected, rsocket.ErrorCodeInvalid}
	backoff := Backoff{Min: DefaultBackoffMin, Max: DefaultBackoffMax, Holding: DefaultBackoffHolding}
	configured := []string{"10.0.0.1:7000", "10.0.0.9:7000"}
	f.Fuzz(func(t *testing.T, code uint32, data []byte) {
		err := remoteError(frameError{rsocket.ErrorCode(code), string(data)})
		matched := 0
		for _, s := range sentinels {
			if errors.Is(err, s) {
				matched++
			}
		}
		if slices.Contains(wireCodes, rsocket.ErrorCode(code)) {
			if matched != 1 || errors.Is(err, ErrDisconnected) {
				t.Fatalf("remoteError(%s %q) = %v: %d sentinels of the catalog, want one", rsocket.ErrorCode(code), data, err, matched)
			}
		} else if matched != 0 || !errors.Is(err, ErrDisconnected) {
			t.Fatalf("remoteError(%s %q) = %v, want ErrDisconnected alone", rsocket.ErrorCode(code), data, err)
		}
		if _, addr, ok := redirectTarget(err); ok && (addr == "" || !errors.Is(err, lease.ErrNotLeader)) {
			t.Fatalf("remoteError(%q) redirects to %q: %v", data, addr, err)
		}

		for _, holding := range []bool{false, true} {
			p := newDialPlan(backoff, configured, 0, func() float64 { return 0.999 })
			r := p.next(attemptResult{addr: configured[0], err: err, holding: holding})
			if len(p.learned) > maxLearnedAddrs {
				t.Fatalf("learned %d addresses from %q", len(p.learned), data)
			}
			for i, a := range p.learned {
				if host, port, err := net.SplitHostPort(a); err != nil || host == "" || port == "" ||
					slices.Contains(configured, a) || slices.Contains(p.learned[:i], a) {
					t.Fatalf("learned %q from %q: %v", a, data, p.learned)
				}
			}
			if !r.redirect && !slices.Contains(p.addrs(), r.addr) {
				t.Fatalf("next attempt to %q, outside the list %v", r.addr, p.addrs())
			}
			if r.redirect && r.delay != 0 {
				t.Fatalf("a redirect waits %v", r.delay)
			}
			if r.delay < 0 || r.delay > backoff.Max {
				t.Fatalf("next attempt after %v", r.delay)
			}
		}
	})
}
