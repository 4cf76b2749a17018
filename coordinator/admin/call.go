package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/retryring/retryring/lease"
)

// The plumbing every admin call that changes something shares: its body read and decoded
// strictly, its errors answered with their codes, and a follower's forwarding of it to the leader.

// HeaderForwardedBy marks an admin call a follower forwarded to the leader, with the follower's
// node id: a node that gets one and does not lead answers no_leader instead of forwarding it again
// (two nodes with stale views of the leader must not pass a call back and forth).
const HeaderForwardedBy = "Retryring-Forwarded-By"

// MaxBody bounds the body of an admin call.
const MaxBody = 64 << 10

// ReadBody reads the body of an admin call, at most MaxBody bytes; it answers 400 itself and
// reports false when the body is unreadable or larger. The caller was admitted at the HTTP edge
// already (Node.Authorize checks the bearer token of every mutating call, before a follower
// forwards it with the header and the leader checks it again).
func ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	switch {
	case err != nil:
		WriteError(w, fmt.Errorf("%w: read the body: %w", lease.ErrBadRequest, err))
		return nil, false
	case len(body) > MaxBody:
		WriteError(w, fmt.Errorf("%w: the body is larger than %d bytes", lease.ErrBadRequest, MaxBody))
		return nil, false
	}
	return body, true
}

// DecodeStrict reads a JSON object into v, refusing unknown fields and anything after it; an
// empty body is {}. A refusal is lease.ErrBadRequest.
func DecodeStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: body: %w", lease.ErrBadRequest, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: body: data after the JSON object", lease.ErrBadRequest)
	}
	return nil
}

// WriteError answers an admin call with the error's code and message: 400 bad_request, 409
// upgrade_incomplete or peer_conflict, 404 unknown_worker, 503 no_leader or unavailable, 500
// internal. The message leaves out the code it starts with.
func WriteError(w http.ResponseWriter, err error) {
	status, code := http.StatusInternalServerError, lease.ToWire(err).Code
	switch {
	case errors.Is(err, ErrUpgradeIncomplete):
		status, code = http.StatusConflict, CodeUpgradeIncomplete
	case errors.Is(err, ErrPeerConflict):
		status, code = http.StatusConflict, CodePeerConflict
	case errors.Is(err, lease.ErrBadRequest):
		status = http.StatusBadRequest
	case errors.Is(err, lease.ErrUnknownWorker):
		status = http.StatusNotFound
	case errors.Is(err, lease.ErrNoLeader):
		status = http.StatusServiceUnavailable
	case errors.Is(err, lease.ErrUnavailable):
		status = http.StatusServiceUnavailable
	}
	WriteJSON(w, status, lease.WireError{Code: code, Message: strings.TrimPrefix(err.Error(), code+": ")})
}

// Forwarded is a leader's answer to a call a follower forwarded, copied back to the caller as it
// came.
type Forwarded struct {
	Status      int
	ContentType string
	Body        []byte
}

// NoLeader reports whether the node taken for the leader answered that it does not lead: it lost
// the lead (or was removed) after the follower last heard of it, and the follower asks Raft again.
func (a Forwarded) NoLeader() bool {
	var e struct {
		Error string `json:"error"`
	}
	return a.Status == http.StatusServiceUnavailable && json.Unmarshal(a.Body, &e) == nil && e.Error == lease.CodeNoLeader
}

// callPathAndMethod answers a call whose path did not parse (404, with parseErr's reason) or that
// is not a POST (405), as lease.WireError, and reports whether the call may go on. The ring and
// worker calls share it.
func callPathAndMethod(w http.ResponseWriter, r *http.Request, parseErr error) bool {
	if parseErr != nil {
		WriteJSON(w, http.StatusNotFound, lease.WireError{Code: "not_found", Message: parseErr.Error()})
		return false
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		WriteJSON(w, http.StatusMethodNotAllowed, lease.WireError{Code: "method_not_allowed", Message: r.Method + " " + r.URL.Path})
		return false
	}
	return true
}
