package leader

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// ErrPastWriteBy: a decided element was not written because the moment it could still be written
// had passed (Send.Check).
var ErrPastWriteBy = errors.New("leader: lease element past its write-by")

// Stream is a lease stream as the send decision sees it.
type Stream struct {
	Member Member
	Ring   lease.RingKey
	// Controls: the client announced lease.FeatureControls; every element carries them.
	Controls bool
	// TTL and Renewal are what every element says (the leader's lease timing).
	TTL, Renewal time.Duration
}

// Sent is what a stream sent last, and whether a renewal is due.
type Sent struct {
	Renew    bool
	Epoch    uint64 // 0 before the first element
	Controls string // JSON of the controls of the last element sent
}

// Share is a member's share of its ring's rate limit, as the leader's share book has it (it
// moves with the members' reports, which only the coordinator has); Limited is false when the
// ring has no limit.
type Share struct {
	PerSecond float64
	Limited   bool
}

// Send is a decision to write one lease element to a stream.
type Send struct {
	Element lease.WireLease
	// Controls is the JSON of the element's controls (empty for a client without the feature).
	Controls string
	// WriteBy is the latest moment the element may still be written: the end of the proof of
	// leadership it was decided under (the coordinator's leaderTerm.canSend). The argument for
	// leader changes (docs/architecture.md, exclusivity, item 3) has a leader send only until
	// t0 + LeaderLease, which a newer leader's wait (Times.HoldsAliveUntil) covers. The
	// decision is checked against it before the send log's stamp, and the driver checks it
	// again just before the write, so that the statement holds of the write itself, not of a
	// check that a pause (GC, SIGSTOP) may separate from it. Strictly, the wait needs less: the
	// worker counts the TTL from the demand the element answers, which the leader received
	// before it decided; a write found late is not made, and the demand stays for the next proof.
	WriteBy time.Time
}

// Check is the driver's last question before it writes: nil while now is before WriteBy.
func (s Send) Check(now time.Time) error {
	if now.Before(s.WriteBy) {
		return nil
	}
	return fmt.Errorf("%w: its proof of leadership ended at %s, %v before the write; it waits for the next proof",
		ErrPastWriteBy, s.WriteBy.UTC().Format(time.RFC3339Nano), now.Sub(s.WriteBy))
}

// Element is the element a stream should be sent now from the committed ring r (nil: not in the
// state), and whether one is due: the member is active and assigned, and a renewal is due, its
// epoch changed, or its controls changed. A client without the controls feature gets none while
// the ring is paused whole: it cannot obey the pause, so its lease runs out instead; its tokens
// stay its own (it is neither down nor expired while its connection lives: DecideRing), and the
// renewal that stays due goes out once the pause ends. writeBy is the end of the term's proof of
// leadership (zero: the term may not send), carried into Send.WriteBy.
//
// The coordinator runs it twice per send, and must: once without the send log's lock, to learn
// whether anything is due (an idle stream then costs no lock, and a due one may ask for a proof
// first), and once inside the send log's stamp, whose result is the one sent. Only the second
// read and the record of its send are one step under the lock the reconcile pass copies the log
// under, so that a hold the pass sees committed either has its latest send in the copy or can no
// longer be sent (coordinator/sendlog.go). Sending what the first read built would break that:
// the state may have moved between the two reads.
func Element(r *fsm.Ring, s Stream, share Share, last Sent, now, writeBy time.Time) (Send, bool) {
	if r == nil {
		return Send{}, false
	}
	m := r.Members[s.Member.Key()]
	if m == nil || !m.Active || !m.Assigned() {
		return Send{}, false
	}
	l := lease.Lease{
		WorkerID: m.WorkerID, Ring: r.Key, NodeIndex: m.NodeIndex, NodeCount: m.NodeCount,
		Epoch: m.Epoch, Generation: r.Generation, Ranges: m.Ranges,
		TTL: s.TTL, Renewal: s.Renewal,
	}
	var controls string
	switch {
	case s.Controls:
		l.Controls = WireControls(r.Controls, share)
		b, err := json.Marshal(l.Controls)
		if err != nil {
			return Send{}, false
		}
		controls = string(b)
	case r.Controls != nil && r.Controls.Paused:
		return Send{}, false
	}
	if !last.Renew && m.Epoch == last.Epoch && controls == last.Controls {
		return Send{}, false
	}
	el := lease.Encode(l, now)
	if el.Ranges == nil {
		el.Ranges = []lease.WireRange{}
	}
	return Send{Element: el, Controls: controls, WriteBy: writeBy}, true
}

// WireControls are the ring's controls as a member obeys them: the pauses, and its share of the
// rate limit when the ring has one, nil otherwise.
func WireControls(c *fsm.Controls, share Share) *lease.Controls {
	out := &lease.Controls{PausedImpl: []string{}}
	if c == nil {
		return out
	}
	out.Paused = c.Paused
	out.PausedImpl = append(out.PausedImpl, c.PausedImpl...)
	if share.Limited {
		out.RatePerS = &share.PerSecond
	}
	return out
}
