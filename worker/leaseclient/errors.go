package leaseclient

import "errors"

// Errors of the client. Errors that the coordinator sent come wrapped around the sentinels of
// lease/wire.go (lease.ErrNotLeader, lease.ErrUnavailable, ...), so errors.Is works on both.
var (
	// ErrInvalidConfig means Validate refused the Config.
	ErrInvalidConfig = errors.New("leaseclient: invalid config")
	// ErrNotConnected means no connection to the leader is open right now; the request was not sent.
	ErrNotConnected = errors.New("leaseclient: not connected to the coordinator leader")
	// ErrDisconnected means the connection failed or closed under a request or the lease stream.
	ErrDisconnected = errors.New("leaseclient: connection lost")
	// ErrProtocol means the coordinator sent something this client cannot accept (an element for
	// another worker or ring, unparseable JSON, an unacknowledged release); the client reconnects.
	ErrProtocol = errors.New("leaseclient: protocol violation by the coordinator")
	// ErrAlreadyRunning means Run was called a second time on one Client.
	ErrAlreadyRunning = errors.New("leaseclient: Run already called")
	// ErrClosed means the client has left its ring; it cannot be used again.
	ErrClosed = errors.New("leaseclient: client has left")
	// ErrRefused means CheckCredentials got a definite no: a coordinator refused the SETUP (its
	// token, worker id or ring) or the client certificate, the worker did not trust the
	// coordinator's certificate, or the TLS handshake failed otherwise. Retrying with the same
	// configuration gets the same answer.
	ErrRefused = errors.New("leaseclient: credentials refused")
)
