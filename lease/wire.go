package lease

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"time"
)

// Routes of the wire protocol (RSocket routing metadata). docs/protocol.md describes each one.
const (
	RouteLeases  = "ring.leases"  // request-stream of WireLease
	RouteRelease = "ring.release" // request-response ReleaseRequest -> Ack
	RouteLeave   = "ring.leave"   // request-response LeaveRequest -> Ack
	RouteView    = "ring.view"    // request-response {} -> ring view (GET /v1/ring)
	RouteReport  = "ring.report"  // request-response Report -> Ack, every ReportPeriod
)

// FeatureControls is the SETUP feature of a client that obeys flow controls: every lease element
// it gets carries Controls. A client without it gets no renewal while its ring is paused whole.
const FeatureControls = "controls"

// ReportPeriod is how often a worker sends ring.report. The leader reads a report older than
// three periods as unknown, never as fine.
const ReportPeriod = 5 * time.Second

// MaxReportBreakers bounds the breakers one report may list: a report is kept in memory per
// member, and nothing a client sends may grow it without bound.
const MaxReportBreakers = 64

// MIME types of the SETUP frame.
const (
	DataMIME     = "application/json"
	MetadataMIME = "message/x.rsocket.composite-metadata.v0"
)

// MaxSetupTokenBytes bounds a SETUP's token.
const MaxSetupTokenBytes = 512

// Setup is the SETUP frame's data. Token is a secret: never log it nor show it (the coordinator
// clears it once checked).
type Setup struct {
	WorkerID    string `json:"worker_id"`
	Incarnation string `json:"incarnation"`
	Region      string `json:"region"`
	Cluster     string `json:"cluster"`
	Service     string `json:"service"`
	Token       string `json:"token,omitempty"`
	// Features the client supports (FeatureControls); unknown ones are ignored.
	Features []string `json:"features,omitempty"`
}

// Has reports whether the client announced feature f.
func (s Setup) Has(f string) bool {
	for _, x := range s.Features {
		if x == f {
			return true
		}
	}
	return false
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
	if len(s.Token) > MaxSetupTokenBytes {
		return fmt.Errorf("%w: token is limited to %d bytes", ErrBadRequest, MaxSetupTokenBytes)
	}
	if len(s.Features) > 16 {
		return fmt.Errorf("%w: at most 16 features", ErrBadRequest)
	}
	for _, f := range s.Features {
		if len(f) > 64 {
			return fmt.Errorf("%w: features are limited to 64 bytes each", ErrBadRequest)
		}
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
	RenewalMs  int64       `json:"renewal_ms"`
	IssuedAtMs int64       `json:"issued_at_ms"`
	// Controls: to clients that announced FeatureControls only, in every element.
	Controls *Controls `json:"controls,omitempty"`
}

// Controls are a ring's flow controls as one worker must obey them (product.md, "Operating
// retries"): a pause of the whole ring (no traversal, no execution), a pause of some impl types
// (no execution of them), and this worker's share of the ring's rate limit.
type Controls struct {
	Paused     bool     `json:"paused"`
	PausedImpl []string `json:"paused_impl"`
	// RatePerS is this worker's executions per second at most; nil: no limit. A member with no
	// range gets 0.
	RatePerS *float64 `json:"rate_per_s"`
}

// ImplPaused reports whether executions of impl are paused (the whole ring, or impl).
func (c *Controls) ImplPaused(impl string) bool {
	if c == nil {
		return false
	}
	if c.Paused {
		return true
	}
	for _, p := range c.PausedImpl {
		if p == impl {
			return true
		}
	}
	return false
}

// Report is the data of ring.report: what a worker saw, for the operator (product.md, "Reports").
// Counters are cumulative since the worker's incarnation started, so that the leader computes
// rates from any two reports and a lost report loses nothing.
type Report struct {
	WorkerID string `json:"worker_id"`
	// Executions by outcome: done, transient, permanent, not_sent.
	Executions map[string]uint64 `json:"executions"`
	// DeadLettered counts steps given up on; GuardRefusals operations the guard refused.
	DeadLettered  uint64 `json:"dead_lettered"`
	GuardRefusals uint64 `json:"guard_refusals"`
	// Breakers lists the circuit breakers that are not closed (at most MaxReportBreakers).
	Breakers []BreakerReport `json:"breakers"`
	// OldestWindowStartMs is the start (UTC ms) of the oldest readable window of its ranges that
	// it has not finished, 0 when none; PendingRows the rows it left unfinished in readable
	// windows at its last pass.
	OldestWindowStartMs int64 `json:"oldest_window_start_ms"`
	PendingRows         int64 `json:"pending_rows"`
	// DirectoryOldestWindowStartMs, from Node-0 only: the oldest live window of the whole
	// directory (it reads tier 2 anyway), so that a range nobody drains still shows. 0: none or
	// not Node-0.
	DirectoryOldestWindowStartMs int64 `json:"directory_oldest_window_start_ms,omitempty"`
	// LeaseFit is "" when the worker's timeouts fit its leases, else why not (it is not ready).
	LeaseFit string `json:"lease_fit,omitempty"`
	// Clock is the worker's clock offset from Cassandra's (docs/protocol.md section 7.1); absent
	// before its first measurement and from workers that predate it.
	Clock *ClockReport `json:"clock,omitempty"`
}

// ClockReport is a worker's measured clock offset and its verdict (package clockcheck).
type ClockReport struct {
	// OffsetUs is Cassandra's clock minus the worker's, in µs: positive when the worker is behind.
	OffsetUs int64 `json:"offset_us"`
	// UncertaintyUs bounds the measurement's error (half its least round trip), in µs.
	UncertaintyUs int64 `json:"uncertainty_us"`
	// LimitUs is max_clock_offset / 2, what |offset| + uncertainty must stay within, in µs.
	LimitUs int64 `json:"limit_us"`
	// AgeMs is the measurement's age when the report was sent.
	AgeMs int64 `json:"age_ms"`
	// Trusted: the estimate is fresh and within the limit. An untrusted worker leaves its ring,
	// so a member reports false only for the moment before it leaves.
	Trusted bool `json:"trusted"`
}

// BreakerReport is one circuit breaker that is open or half open.
type BreakerReport struct {
	Impl  string `json:"impl"`  // "" for the breaker of the whole ring
	State string `json:"state"` // "open" or "half_open"
	// OpenUntilMs is when the cool-off ends (UTC ms), for an open breaker.
	OpenUntilMs int64 `json:"open_until_ms,omitempty"`
}

// Breaker states a report may carry (a closed breaker is not listed).
const (
	BreakerOpen     = "open"
	BreakerHalfOpen = "half_open"
)

// Validate refuses a report that is larger than a worker has reason to send, or that says
// something no worker can mean (a negative backlog, a breaker state that does not exist): the
// leader keeps the last report of every member and shows it to people as it is.
func (r Report) Validate() error {
	if len(r.Breakers) > MaxReportBreakers || len(r.Executions) > 8 {
		return fmt.Errorf("%w: report lists %d breakers and %d outcomes (at most %d and 8)", ErrBadRequest, len(r.Breakers), len(r.Executions), MaxReportBreakers)
	}
	for outcome := range r.Executions {
		if outcome == "" || len(outcome) > 64 {
			return fmt.Errorf("%w: execution outcome names are 1 to 64 bytes", ErrBadRequest)
		}
	}
	for _, b := range r.Breakers {
		if len(b.Impl) > MaxRingNameBytes {
			return fmt.Errorf("%w: breaker impl longer than %d bytes", ErrBadRequest, MaxRingNameBytes)
		}
		if b.State != BreakerOpen && b.State != BreakerHalfOpen {
			return fmt.Errorf("%w: breaker state %.32q, want %q or %q", ErrBadRequest, b.State, BreakerOpen, BreakerHalfOpen)
		}
	}
	if r.OldestWindowStartMs < 0 || r.PendingRows < 0 || r.DirectoryOldestWindowStartMs < 0 {
		return fmt.Errorf("%w: negative oldest_window_start_ms, pending_rows or directory_oldest_window_start_ms", ErrBadRequest)
	}
	if len(r.LeaseFit) > 512 {
		return fmt.Errorf("%w: lease_fit longer than 512 bytes", ErrBadRequest)
	}
	if c := r.Clock; c != nil && (c.UncertaintyUs < 0 || c.LimitUs < 0 || c.AgeMs < 0) {
		return fmt.Errorf("%w: negative clock uncertainty_us, limit_us or age_ms", ErrBadRequest)
	}
	return nil
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
		TTLMs: l.TTL.Milliseconds(), RenewalMs: l.Renewal.Milliseconds(), IssuedAtMs: issuedAt.UnixMilli(),
		Controls: l.Controls,
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
	if w.RenewalMs < 0 || w.RenewalMs > w.TTLMs {
		return Lease{}, fmt.Errorf("%w: renewal_ms %d outside [0, ttl_ms %d]", ErrBadRequest, w.RenewalMs, w.TTLMs)
	}
	if c := w.Controls; c != nil && c.RatePerS != nil && (*c.RatePerS < 0 || math.IsNaN(*c.RatePerS)) {
		return Lease{}, fmt.Errorf("%w: controls.rate_per_s %v", ErrBadRequest, *c.RatePerS)
	}
	return Lease{
		WorkerID: w.WorkerID, Ring: w.Ring, NodeIndex: w.NodeIndex, NodeCount: w.NodeCount,
		Epoch: w.Epoch, Generation: w.Generation, Ranges: rs,
		TTL: time.Duration(w.TTLMs) * time.Millisecond, ValidFrom: demandSent,
		Renewal: time.Duration(w.RenewalMs) * time.Millisecond, Controls: w.Controls,
	}, nil
}

// Error codes of the catalog. Every APPLICATION_ERROR and REJECTED_SETUP carries a WireError whose
// Code is one of these.
const (
	CodeNotLeader     = "not_leader"           // this coordinator is a follower; see leader_id and leader_rsocket_addr
	CodeNoLeader      = "no_leader"            // no live leader is known (election under way, quorum lost); try the next of coordinators
	CodeBadRequest    = "bad_request"          // malformed JSON, missing field or wrong worker_id
	CodeUnknownRoute  = "unknown_route"        // no such route
	CodeBadSetup      = "bad_setup"            // SETUP data or MIME types refused
	CodeDuplicate     = "duplicate_connection" // the same worker_id and incarnation is already connected
	CodeUnavailable   = "unavailable"          // the replicated state could not be written (quorum lost); retry
	CodeUnknownWorker = "unknown_worker"       // the worker is not a member (e.g. it left); reconnect to join again
	CodeUnauthorized  = "unauthorized"         // auth token refused
	CodeBusy          = "busy"                 // over a limit of the coordinator (SETUPs per second, lease streams per ring); retry after retry_after_ms
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
	// ErrBusy: the coordinator is at one of its limits; retry after the error's RetryAfterMs.
	ErrBusy = errors.New("busy")
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
	{CodeUnauthorized, ErrUnauthorized}, {CodeBusy, ErrBusy}, {CodeInternal, ErrInternal},
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
	// Coordinators are the coordinators the answering node knows (no_leader from a coordinator
	// node), sorted by id, at most MaxWireCoordinators: where a client goes next when it was told
	// of no live leader, instead of dialling a dead node again.
	Coordinators []WireCoordinator `json:"coordinators,omitempty"`
	// RetryAfterMs (busy) is how long the client should wait at least before it tries this
	// coordinator again; a client bounds it by its own maximum backoff.
	RetryAfterMs int64 `json:"retry_after_ms,omitempty"`
}

// WireCoordinator is one coordinator of an error's coordinators list: its node id and the
// address workers connect to.
type WireCoordinator struct {
	ID          string `json:"id"`
	RSocketAddr string `json:"rsocket_addr"`
}

// Bounds of an error body. A client reads error bodies from any node it dials, so what it keeps
// from one is bounded: a Raft cluster has a handful of voters, node ids are at most 128 bytes
// (the coordinator's own limit) and an address is a host and a port.
const (
	MaxWireErrorBytes   = 64 << 10
	MaxWireCoordinators = 16
	maxCoordinatorID    = 128
	maxRSocketAddr      = 256
)

// Validate refuses an entry that names no node, or no host:port to dial. A client drops such an
// entry, and a coordinator leaves it out of the lists it sends.
func (c WireCoordinator) Validate() error {
	if c.ID == "" || len(c.ID) > maxCoordinatorID {
		return fmt.Errorf("%w: coordinator id of %d bytes, want 1 to %d", ErrBadRequest, len(c.ID), maxCoordinatorID)
	}
	if len(c.RSocketAddr) > maxRSocketAddr {
		return fmt.Errorf("%w: rsocket_addr longer than %d bytes", ErrBadRequest, maxRSocketAddr)
	}
	if _, port, err := net.SplitHostPort(c.RSocketAddr); err != nil || port == "" {
		return fmt.Errorf("%w: rsocket_addr %.64q is not host:port", ErrBadRequest, c.RSocketAddr)
	}
	return nil
}

// decodeCoordinators keeps the well-formed entries of a coordinators array, the first
// MaxWireCoordinators of them. Anything else names nothing: the list is a hint of where to go
// next, and a bad one must not cost the client the error's code.
func decodeCoordinators(raw json.RawMessage) []WireCoordinator {
	var items []json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &items) != nil {
		return nil
	}
	var out []WireCoordinator
	for _, it := range items {
		var c WireCoordinator
		if json.Unmarshal(it, &c) != nil || c.Validate() != nil {
			continue
		}
		if out = append(out, c); len(out) == MaxWireCoordinators {
			break
		}
	}
	return out
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

// FromWire parses an error body; text that is not a WireError becomes an ErrInternal, and so does
// a body larger than MaxWireErrorBytes. Of coordinators it keeps the well-formed entries only
// (decodeCoordinators). Unknown fields are ignored.
func FromWire(data []byte) error {
	if len(data) > MaxWireErrorBytes {
		return fmt.Errorf("%w: error body of %d bytes, at most %d: %q", ErrInternal, len(data), MaxWireErrorBytes, truncate(data, 200))
	}
	var body struct {
		WireError
		Coordinators json.RawMessage `json:"coordinators"` // shadows WireError's, decoded below
	}
	if err := json.Unmarshal(data, &body); err != nil || body.Code == "" {
		return fmt.Errorf("%w: unparseable error %q", ErrInternal, truncate(data, 200))
	}
	we := body.WireError
	we.Coordinators = decodeCoordinators(body.Coordinators)
	return &we
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
