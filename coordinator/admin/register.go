package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"

	"github.com/retryring/retryring/lease"
)

// PathRegister is the internal call by which a follower registers its addresses with the leader:
// POST Registration, answers lease.Ack. Only coordinators may make it (the edge checks the
// cluster secret or the Raft certificate of every /v1/internal/ call).
const PathRegister = "/v1/internal/register"

// Bounds of a registration: ids as the coordinator's flags allow them, addresses as host:port of
// a reasonable length, and an FSM version no release will reach.
const (
	maxRegistrationBody = 4 << 10
	maxRegistrationAddr = 256
	maxFSMVersion       = 1 << 16
)

// Registration is a coordinator's addresses and FSM version as it registers them: the JSON of
// the replicated state's coordinator, field for field (the coordinator converts one into the
// other, so a field added to one and not to the other does not compile).
type Registration struct {
	ID          string `json:"id"`
	RaftAddr    string `json:"raft_addr"`
	RSocketAddr string `json:"rsocket_addr"`
	HTTPAddr    string `json:"http_addr"`
	FSMVersion  int    `json:"fsm_version,omitempty"`
}

// Registrar is what the registration of a coordinator's addresses needs of the leader: whether
// the caller is a server of the Raft configuration, whether the replicated state holds the
// registration already, and its commit. It is defined here, where it is used, and implemented by
// the coordinator's adapter.
type Registrar interface {
	// InConfiguration reports whether id is a server of the Raft configuration.
	InConfiguration(id string) bool
	// Registered reports whether the replicated state holds reg as it is: then nothing is
	// committed (every registration was an fsync'd entry, whoever sent it).
	Registered(reg Registration) bool
	// Register commits reg; a refusal of reg itself wraps lease.ErrBadRequest (400), any other
	// error is answered 503.
	Register(reg Registration) error
}

// ServeRegistrations adds POST PathRegister, committed through r.
func (s *Server) ServeRegistrations(r Registrar) {
	s.registrar = r
	s.Handle(PathRegister, http.MethodPost, s.serveRegister)
}

// serveRegister commits a coordinator's addresses; only the leader accepts, and only voters of
// the Raft configuration may register.
func (s *Server) serveRegister(w http.ResponseWriter, r *http.Request) {
	var c Registration
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRegistrationBody))
	if err == nil {
		err = json.Unmarshal(body, &c)
	}
	if err != nil || c.ID == "" || c.RSocketAddr == "" || c.HTTPAddr == "" {
		WriteJSON(w, http.StatusBadRequest, lease.WireError{Code: lease.CodeBadRequest, Message: "want a JSON coordinator with id, rsocket_addr and http_addr"})
		return
	}
	if !s.registrar.InConfiguration(c.ID) {
		WriteJSON(w, http.StatusBadRequest, lease.WireError{Code: lease.CodeBadRequest, Message: strconv.Quote(c.ID) + " is not in the raft configuration"})
		return
	}
	if err := checkRegistration(c); err != nil {
		WriteJSON(w, http.StatusBadRequest, lease.ToWire(err))
		return
	}
	if s.registrar.Registered(c) {
		WriteJSON(w, http.StatusOK, lease.Ack{OK: true})
		return
	}
	if err := s.registrar.Register(c); err != nil {
		status := http.StatusServiceUnavailable
		if errors.Is(err, lease.ErrBadRequest) {
			status = http.StatusBadRequest
		}
		WriteJSON(w, status, lease.ToWire(err))
		return
	}
	WriteJSON(w, http.StatusOK, lease.Ack{OK: true})
}

// checkRegistration refuses a registration whose fields are out of bounds.
func checkRegistration(c Registration) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: registration: %s", lease.ErrBadRequest, fmt.Sprintf(format, args...))
	}
	if !ValidNodeID(c.ID) {
		return bad("id %.64q is not a node id", c.ID)
	}
	// In the JSON's order, so that a registration with two bad addresses is refused for the same
	// one every time (a map's order would pick either).
	for _, f := range []struct{ name, addr string }{{"raft_addr", c.RaftAddr}, {"rsocket_addr", c.RSocketAddr}, {"http_addr", c.HTTPAddr}} {
		name, addr := f.name, f.addr
		if addr == "" && name == "raft_addr" {
			continue
		}
		if len(addr) > maxRegistrationAddr {
			return bad("%s longer than %d bytes", name, maxRegistrationAddr)
		}
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
			return bad("%s %.64q is not host:port", name, addr)
		}
	}
	if c.FSMVersion < 0 || c.FSMVersion > maxFSMVersion {
		return bad("fsm_version %d", c.FSMVersion)
	}
	return nil
}
