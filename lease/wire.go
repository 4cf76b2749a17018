package lease

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Routes of the wire protocol (RSocket routing metadata). docs/protocol.md describes each one.
const (
	RouteLeases  = "ring.leases"  // request-stream of WireLease
	RouteRelease = "ring.release" // request-response ReleaseRequest -> Ack
	RouteLeave   = "ring.leave"   // request-response LeaveRequest -> Ack
	RouteView    = "ring.view"    // request-response {} -> ring view (GET /v1/ring)
)

// MIME types of the SETUP frame.
const (
	DataMIME     = "application/json"
	MetadataMIME = "message/x.rsocket.composite-metadata.v0"
)

// Setup is the SETUP frame's data.
type Setup struct {
	WorkerID    string `json:"worker_id"`
	Incarnation string `json:"incarnation"`
	Region      string `json:"region"`
	Cluster     string `json:"cluster"`
	Service     string `json:"service"`
	Token       string `json:"token,omitempty"`
}

// Ring returns the ring the worker joins.
func (s Setup) Ring() RingKey {
	return RingKey{Region: s.Region, Cluster: s.Cluster, Service: s.Service}
}

// Validate refuses a SETUP that names no worker, no incarnation or no ring.
func (s Setup) Validate() error {
	if s.WorkerID == "" {
		return fmt.Errorf("%w: worker_id is empty", ErrBadRequest)
	}
	if len(s.WorkerID) > 256 || len(s.Incarnation) > 256 {
		return fmt.Errorf("%w: worker_id and incarnation are limited to 256 bytes", ErrBadRequest)
	}
	if s.Incarnation == "" {
		return fmt.Errorf("%w: incarnation is empty", ErrBadRequest)
	}
	return s.Ring().Validate()
}

// LeasesRequest is the data of a ring.leases request: {} or {"worker_id"} (which must then match SETUP).
type LeasesRequest struct {
	WorkerID string `json:"worker_id,omitempty"`
}

// ReleaseRequest says: the worker uses nothing but its lease of Epoch.
type ReleaseRequest struct {
	WorkerID string `json:"worker_id"`
	Epoch    uint64 `json:"epoch"`
}

// LeaveRequest is a graceful leave: every range of the worker is free at once.
type LeaveRequest struct {
	WorkerID string `json:"worker_id"`
}

// Ack answers ring.release and ring.leave.
type Ack struct {
	OK bool `json:"ok"`
}

// WireRange is a range on the wire: tokens as decimal strings (JSON numbers lose precision past
// 2^53 in many languages), both bounds inclusive.
type WireRange struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// WireLease is one element of the ring.leases stream.
type WireLease struct {
	WorkerID   string      `json:"worker_id"`
	Ring       RingKey     `json:"ring"`
	NodeIndex  int         `json:"node_index"`
	NodeCount  int         `json:"node_count"`
	Epoch      uint64      `json:"epoch"`
	Generation uint64      `json:"generation"`
	Ranges     []WireRange `json:"ranges"`
	TTLMs      int64       `json:"ttl_ms"`
	IssuedAtMs int64       `json:"issued_at_ms"`
}

// EncodeRanges turns ranges into their wire form.
func EncodeRanges(rs Ranges) []WireRange {
	out := make([]WireRange, len(rs))
	for i, r := range rs {
		out[i] = WireRange{Start: strconv.FormatInt(r.Start, 10), End: strconv.FormatInt(r.End, 10)}
	}
	return out
}

// DecodeRanges parses wire ranges, refusing bad numbers and Start > End.
func DecodeRanges(ws []WireRange) (Ranges, error) {
	rs := make([]Range, len(ws))
	for i, w := range ws {
		s, err := strconv.ParseInt(w.Start, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: range %d start %q: %w", ErrBadRequest, i, w.Start, err)
		}
		e, err := strconv.ParseInt(w.End, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: range %d end %q: %w", ErrBadRequest, i, w.End, err)
		}
		if s > e {
			return nil, fmt.Errorf("%w: range %d start %d > end %d", ErrBadRequest, i, s, e)
		}
		rs[i] = Range{Start: s, End: e}
	}
	return Normalize(rs), nil
}

// Encode builds the wire element of l (ValidFrom is the worker's business and is not sent).
func Encode(l Lease, issuedAt time.Time) WireLease {
	return WireLease{
		WorkerID: l.WorkerID, Ring: l.Ring, NodeIndex: l.NodeIndex, NodeCount: l.NodeCount,
		Epoch: l.Epoch, Generation: l.Generation, Ranges: EncodeRanges(l.Ranges),
		TTLMs: l.TTL.Milliseconds(), IssuedAtMs: issuedAt.UnixMilli(),
	}
}

// Decode turns a wire element into a Lease valid from demandSent, the worker's monotonic time of
// the demand this element answers.
func (w WireLease) Decode(demandSent time.Time) (Lease, error) {
	rs, err := DecodeRanges(w.Ranges)
	if err != nil {
		return Lease{}, err
	}
	// The upper bound keeps TTLMs×1ms inside a time.Duration: past it the product wraps around and a
	// nonsense TTL would become a plausible one.
	if w.NodeCount < 0 || w.NodeIndex < 0 || (w.NodeCount > 0 && w.NodeIndex >= w.NodeCount) {
		return Lease{}, fmt.Errorf("%w: node_index %d outside node_count %d", ErrBadRequest, w.NodeIndex, w.NodeCount)
	}
	if w.TTLMs <= 0 || w.TTLMs > math.MaxInt64/int64(time.Millisecond) {
		return Lease{}, fmt.Errorf("%w: ttl_ms %d", ErrBadRequest, w.TTLMs)
	}
	return Lease{
		WorkerID: w.WorkerID, Ring: w.Ring, NodeIndex: w.NodeIndex, NodeCount: w.NodeCount,
		Epoch: w.Epoch, Generation: w.Generation, Ranges: rs,
		TTL: time.Duration(w.TTLMs) * time.Millisecond, ValidFrom: demandSent,
	}, nil
}

// Error codes of the catalog. Every APPLICATION_ERROR and REJECTED_SETUP carries a WireError whose
// Code is one of these.
const (
	CodeNotLeader     = "not_leader"           // this coordinator is a follower; see leader_id and leader_rsocket_addr
	CodeNoLeader      = "no_leader"            // no leader is known (election under way or quorum lost); retry with backoff
	CodeBadRequest    = "bad_request"          // malformed JSON, missing field or wrong worker_id
	CodeUnknownRoute  = "unknown_route"        // no such route
	CodeBadSetup      = "bad_setup"            // SETUP data or MIME types refused
	CodeDuplicate     = "duplicate_connection" // the same worker_id and incarnation is already connected
	CodeUnavailable   = "unavailable"          // the replicated state could not be written (quorum lost); retry
	CodeUnknownWorker = "unknown_worker"       // the worker is not a member (e.g. it left); reconnect to join again
	CodeUnauthorized  = "unauthorized"         // auth token refused
	CodeInternal      = "internal"             // a bug; the coordinator logged it
)

// Sentinel errors matching the codes, for Go clients and servers. FromWire maps back.
var (
	// ErrNotLeader: the contacted coordinator is not the leader.
	ErrNotLeader = errors.New("not_leader")
	// ErrNoLeader: no leader known right now.
	ErrNoLeader = errors.New("no_leader")
	// ErrBadRequest: the request was malformed.
	ErrBadRequest = errors.New("bad_request")
	// ErrUnknownRoute: the route does not exist.
	ErrUnknownRoute = errors.New("unknown_route")
	// ErrBadSetup: the SETUP frame was refused.
	ErrBadSetup = errors.New("bad_setup")
	// ErrDuplicate: the same worker incarnation is already connected.
	ErrDuplicate = errors.New("duplicate_connection")
	// ErrUnavailable: the coordinator cannot commit right now.
	ErrUnavailable = errors.New("unavailable")
	// ErrUnknownWorker: the worker is not a member of its ring.
	ErrUnknownWorker = errors.New("unknown_worker")
	// ErrUnauthorized: the auth token was refused.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrInternal: an unexpected failure inside the coordinator.
	ErrInternal = errors.New("internal")
)

// catalog lists the codes in the order ToWire tries them. It is a slice, not a map, so that an error
// wrapping two sentinels (errors.Join) always gets the same code.
var catalog = []struct {
	code     string
	sentinel error
}{
	{CodeNotLeader, ErrNotLeader}, {CodeNoLeader, ErrNoLeader}, {CodeBadRequest, ErrBadRequest},
	{CodeUnknownRoute, ErrUnknownRoute}, {CodeBadSetup, ErrBadSetup}, {CodeDuplicate, ErrDuplicate},
	{CodeUnavailable, ErrUnavailable}, {CodeUnknownWorker, ErrUnknownWorker},
	{CodeUnauthorized, ErrUnauthorized}, {CodeInternal, ErrInternal},
}

var codeErrors = func() map[string]error {
	m := make(map[string]error, len(catalog))
	for _, c := range catalog {
		m[c.code] = c.sentinel
	}
	return m
}()

// WireError is the JSON body of an error.
type WireError struct {
	Code              string `json:"error"`
	Message           string `json:"message,omitempty"`
	LeaderID          string `json:"leader_id,omitempty"`
	LeaderRSocketAddr string `json:"leader_rsocket_addr,omitempty"`
}

func (e *WireError) Error() string {
	s := e.Code
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.LeaderID != "" {
		s += fmt.Sprintf(" (leader %s at %s)", e.LeaderID, e.LeaderRSocketAddr)
	}
	return s
}

// Unwrap lets errors.Is match the sentinel of the code.
func (e *WireError) Unwrap() error {
	if err, ok := codeErrors[e.Code]; ok {
		return err
	}
	return ErrInternal
}

// ToWire maps an error to its wire body: a *WireError in its chain is sent as it is; otherwise the
// first sentinel of the catalog (in the order of the Code constants) that it wraps decides the code.
func ToWire(err error) WireError {
	var we *WireError
	if errors.As(err, &we) {
		return *we
	}
	for _, c := range catalog {
		if errors.Is(err, c.sentinel) {
			return WireError{Code: c.code, Message: err.Error()}
		}
	}
	return WireError{Code: CodeInternal, Message: err.Error()}
}

// FromWire parses an error body; text that is not a WireError becomes an ErrInternal.
func FromWire(data []byte) error {
	var we WireError
	if err := json.Unmarshal(data, &we); err != nil || we.Code == "" {
		return fmt.Errorf("%w: unparseable error %q", ErrInternal, truncate(data, 200))
	}
	return &we
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
