package ringtest

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/retryring/retryring/lease"
)

// EventKind names something that happened in a cluster's history.
type EventKind string

// Kinds of events. The harness notes the ones it causes; the recorder notes installs and ends.
const (
	// EventInstall: a worker's guard installed a lease element (Epoch, Ranges, Node0 set).
	EventInstall EventKind = "install"
	// EventEnd: a worker stopped using everything (it left or crashed).
	EventEnd EventKind = "end"

	EventWorkerStarted  EventKind = "worker_started"  // AddWorker or NewIncarnation started a client
	EventWorkerStopped  EventKind = "worker_stopped"  // Stop: the process crashed
	EventWorkerLeaving  EventKind = "worker_leaving"  // Leave was called
	EventWorkerLeft     EventKind = "worker_left"     // Leave returned (Err says how)
	EventWorkerHung     EventKind = "worker_hung"     // the worker's network went silent
	EventWorkerCut      EventKind = "worker_cut"      // the worker was cut off
	EventWorkerHealed   EventKind = "worker_healed"   // the worker's network is back
	EventMemberDown     EventKind = "member_down"     // the leader's committed state shows the member inactive
	EventCoordKilled    EventKind = "coord_killed"    // a coordinator was killed
	EventCoordClosed    EventKind = "coord_closed"    // a coordinator was closed gracefully
	EventCoordRestarted EventKind = "coord_restarted" // a coordinator was started again
	EventCoordHung      EventKind = "coord_hung"      // a coordinator's network went silent
	EventCoordCut       EventKind = "coord_cut"       // a coordinator was cut off
	EventCoordHealed    EventKind = "coord_healed"    // a coordinator's network is back
	EventLeader         EventKind = "leader"          // a (new) coordinator was seen leading
	EventGeneration     EventKind = "generation"      // the leader's state shows a new ring generation (Epoch holds it)
	EventSettled        EventKind = "settled"         // the workers' leases covered the ring with equal shares
	EventFault          EventKind = "fault"           // a test declared a fault of its own
)

// Event is one entry of the history, at an instant of the recorder's clock.
type Event struct {
	Kind        EventKind
	At          time.Duration
	Worker      string
	Incarnation string
	Coordinator string
	Epoch       uint64
	Ranges      lease.Ranges
	Node0       bool
	// Expiry is when an installed element (EventInstall) stops being usable, an instant of the
	// history: an element that merges into the interval before it extends that interval's end, so
	// the end a worker held just before an element is only known from the events.
	Expiry time.Duration
	// Demanded is when the worker sent the demand an installed element answers (its ValidFrom):
	// an element answering a demand sent after a leader was killed came from another leader.
	Demanded time.Duration
	// Fault is set on events that change membership or the network: a settled window ends there.
	Fault bool
	// Err is the outcome of an operation (EventWorkerLeft), if it failed.
	Err error
}

// String renders the event for a timeline.
func (e Event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v %s", e.At.Round(time.Microsecond), e.Kind)
	if e.Worker != "" {
		fmt.Fprintf(&b, " %s", holderName(e.Worker, e.Incarnation))
	}
	if e.Coordinator != "" {
		fmt.Fprintf(&b, " %s", e.Coordinator)
	}
	if e.Kind == EventGeneration {
		fmt.Fprintf(&b, " %d", e.Epoch)
	}
	if e.Kind == EventInstall {
		fmt.Fprintf(&b, " epoch %d %v", e.Epoch, e.Ranges)
		if e.Node0 {
			b.WriteString(" node0")
		}
	}
	if e.Err != nil {
		fmt.Fprintf(&b, " error: %v", e.Err)
	}
	return b.String()
}

// Recorder builds the history of leases as the workers held them, on one shared monotonic clock. It
// is safe for concurrent use; the harness wires Install into each lease client's OnLease hook and End
// into its stop paths.
//
// The lease client calls OnLease just after its guard installed the element, so an interval's From
// is a few microseconds late; the protocol's margins are a hundred milliseconds and more, so the
// checker cannot miss an overlap that matters. An interval's To is exact where it comes from the
// element's own expiry, and taken just after the guard was cleared for a leave.
type Recorder struct {
	origin time.Time
	now    func() time.Time

	mu        sync.Mutex
	done      []Interval
	open      map[string]*openElement
	lastEpoch map[string]uint64
	lastAt    map[string]time.Duration
	ended     map[string]bool
	events    []Event
}

// openElement is the element a holder's guard holds now.
type openElement struct {
	iv     Interval
	expiry time.Duration
}

// NewRecorder returns a recorder whose instants count from now's first reading. now must carry a
// monotonic reading (time.Now does); nil means time.Now.
func NewRecorder(now func() time.Time) *Recorder {
	if now == nil {
		now = time.Now
	}
	return &Recorder{
		origin: now(), now: now,
		open: map[string]*openElement{}, lastEpoch: map[string]uint64{}, lastAt: map[string]time.Duration{},
		ended: map[string]bool{},
	}
}

// Now is the current instant of the recorder's clock.
func (r *Recorder) Now() time.Duration { return r.now().Sub(r.origin) }

// Instant converts a time of the shared clock into an instant of the history.
func (r *Recorder) Instant(t time.Time) time.Duration { return t.Sub(r.origin) }

// Install records that the worker's guard installed l now. Like the guard, it ignores an element of
// an older epoch than the last one, and anything after End. Consecutive elements of one epoch with
// the same ranges extend one interval when the earlier had not expired yet.
func (r *Recorder) Install(worker, incarnation string, l lease.Lease) {
	at := r.Now()
	h := holderName(worker, incarnation)
	ranges := lease.Normalize(l.Ranges)
	expiry := r.Instant(l.ExpiresAt())
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended[h] {
		return
	}
	if last, ok := r.lastEpoch[h]; ok && l.Epoch < last {
		return
	}
	r.lastEpoch[h] = l.Epoch
	r.lastAt[h] = at
	r.events = append(r.events, Event{
		Kind: EventInstall, At: at, Worker: worker, Incarnation: incarnation,
		Epoch: l.Epoch, Ranges: ranges, Node0: l.IsNode0(), Expiry: expiry,
		Demanded: r.Instant(l.ValidFrom),
	})
	if o := r.open[h]; o != nil {
		if o.expiry >= at && expiry > at && o.iv.Epoch == l.Epoch && o.iv.NodeIndex == l.NodeIndex &&
			o.iv.NodeCount == l.NodeCount && o.iv.Ranges.Equal(ranges) {
			o.expiry = expiry
			return
		}
		r.closeLocked(h, at)
	}
	if expiry <= at {
		return // expired on arrival: the guard holds it but refuses everything
	}
	r.open[h] = &openElement{
		iv: Interval{
			Worker: worker, Incarnation: incarnation, Epoch: l.Epoch, NodeIndex: l.NodeIndex, NodeCount: l.NodeCount,
			From: at, Ranges: ranges, Node0: l.IsNode0(),
		},
		expiry: expiry,
	}
}

// LastInstall is the instant of the worker's latest installed element.
func (r *Recorder) LastInstall(worker, incarnation string) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.lastAt[holderName(worker, incarnation)]
	return at, ok
}

// End records that the worker stopped using everything now (a leave once its guard was cleared, or
// a crash). Later installs of the same holder are ignored.
func (r *Recorder) End(worker, incarnation string) {
	at := r.Now()
	h := holderName(worker, incarnation)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended[h] {
		return
	}
	r.ended[h] = true
	r.closeLocked(h, at)
	r.events = append(r.events, Event{Kind: EventEnd, At: at, Worker: worker, Incarnation: incarnation})
}

// closeLocked ends the holder's open interval at the earlier of at and its expiry.
func (r *Recorder) closeLocked(h string, at time.Duration) {
	o := r.open[h]
	if o == nil {
		return
	}
	delete(r.open, h)
	o.iv.To = min(o.expiry, at)
	if !o.iv.empty() {
		r.done = append(r.done, o.iv)
	}
}

// Note records an event of the harness or the test, stamped now; it returns the instant.
func (r *Recorder) Note(e Event) time.Duration {
	e.At = r.Now()
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	return e.At
}

// Events returns a copy of every event so far, in order.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// Intervals returns every interval so far; an element still held ends at its expiry.
func (r *Recorder) Intervals() []Interval {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append([]Interval(nil), r.done...)
	for _, o := range r.open {
		iv := o.iv
		iv.To = o.expiry
		out = append(out, iv)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].From < out[j].From })
	return out
}

// Holding returns, per holder, the element usable at the current instant.
func (r *Recorder) Holding() map[string]Interval {
	at := r.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]Interval{}
	for h, o := range r.open {
		if o.expiry > at && o.iv.From <= at {
			iv := o.iv
			iv.To = o.expiry
			out[h] = iv
		}
	}
	return out
}

// History returns the checker's input: every interval, and a settled window from each EventSettled
// to the first fault at or after it (or to now).
func (r *Recorder) History() History {
	ivs := r.Intervals()
	now := r.Now()
	events := r.Events()
	var windows []Window
	for i, e := range events {
		if e.Kind != EventSettled {
			continue
		}
		end := now
		for _, f := range events[i+1:] {
			if f.Fault {
				end = f.At
				break
			}
		}
		if len(windows) > 0 && windows[len(windows)-1].To >= e.At {
			windows[len(windows)-1].To = max(windows[len(windows)-1].To, end)
			continue
		}
		windows = append(windows, Window{From: e.At, To: end})
	}
	return History{Intervals: ivs, Settled: windows}
}
