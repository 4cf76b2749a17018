package event

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/retryring/retryring/lease"
)

// Kinds of events.
const (
	// Start: the probe process started; Incarnation is its lease client's incarnation.
	Start = "start"
	// Connected: the lease client opened a connection to CoordinatorAddr.
	Connected = "connected"
	// Lease: a lease element was installed in the guard (a renewal, or a new epoch).
	Lease = "lease"
	// LeaveStart: the probe was asked to leave (SIGTERM) and is calling Leave.
	LeaveStart = "leave_start"
	// LeaveDone: Leave returned; Error is its error, if any.
	LeaveDone = "leave_done"
	// Exit: the probe is about to exit; Error says why, if not after a leave.
	Exit = "exit"
)

// key marks a line as an event: a probe's output also holds its lease client's log lines.
const key = `"probe_ev":`

// Event is one line.
type Event struct {
	Kind        string `json:"probe_ev"`
	AtNs        int64  `json:"t_ns"`
	WorkerID    string `json:"worker_id"`
	Incarnation string `json:"incarnation"`
	Pid         int    `json:"pid,omitempty"`
	// CoordinatorAddr is the RSocket address of the connection the lease client was on (Lease,
	// Connected).
	CoordinatorAddr string `json:"coordinator_addr,omitempty"`
	// The lease of a Lease event.
	Epoch      uint64            `json:"epoch,omitempty"`
	Generation uint64            `json:"generation,omitempty"`
	NodeIndex  int               `json:"node_index,omitempty"`
	NodeCount  int               `json:"node_count,omitempty"`
	Ranges     []lease.WireRange `json:"ranges,omitempty"`
	TTLMs      int64             `json:"ttl_ms,omitempty"`
	// ValidFromNs is when the probe sent the demand this element answers; ExpiresAtNs is
	// ValidFromNs + TTL: the guard refuses everything from then on.
	ValidFromNs int64  `json:"valid_from_ns,omitempty"`
	ExpiresAtNs int64  `json:"expires_at_ns,omitempty"`
	Error       string `json:"error,omitempty"`
}

// FromLease fills the lease fields of a Lease event from l, installed at at.
func FromLease(l lease.Lease, at time.Time) Event {
	return Event{
		Kind: Lease, AtNs: at.UnixNano(), WorkerID: l.WorkerID,
		Epoch: l.Epoch, Generation: l.Generation, NodeIndex: l.NodeIndex, NodeCount: l.NodeCount,
		Ranges: lease.EncodeRanges(l.Ranges), TTLMs: l.TTL.Milliseconds(),
		// UnixNano reads the wall-clock half of the time the lease client took at the demand; the
		// guard itself counts on the monotonic half. Both were read at the same instant.
		ValidFromNs: l.ValidFrom.UnixNano(), ExpiresAtNs: l.ExpiresAt().UnixNano(),
	}
}

// Parse reads one line; ok is false for anything that is not an event (a log line, a blank).
func Parse(line []byte) (e Event, ok bool) {
	if !bytes.Contains(line, []byte(key)) {
		return Event{}, false
	}
	if err := json.Unmarshal(line, &e); err != nil || e.Kind == "" {
		return Event{}, false
	}
	return e, true
}

// LeaseRanges decodes the ranges of a Lease event.
func (e Event) LeaseRanges() (lease.Ranges, error) { return lease.DecodeRanges(e.Ranges) }

// At is the event's time.
func (e Event) At() time.Time { return time.Unix(0, e.AtNs) }
