package coordinator

import (
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"
	"github.com/rsocket/rsocket-go"

	"github.com/retryring/retryring/coordinator/auth"
	"github.com/retryring/retryring/coordinator/leader"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// workerConn is one accepted worker connection, on any node.
type workerConn struct {
	id     uint64
	setup  lease.Setup
	member memberID
	socket rsocket.CloseableRSocket
	log    zerolog.Logger
	// admission is what the SETUP was admitted with (auth.go): its token's digest.
	admission auth.Admission
	// closeConn closes the underlying net.Conn; false when it was closed already.
	closeConn func() bool

	mu      sync.Mutex
	closed  bool
	streams map[*leaseStream]struct{}
	// ended: a lease stream was open on this connection and none is now. The worker no longer
	// takes renewals, so the leader treats it as gone although the connection is open.
	ended bool

	// displaced is the incarnation whose connection this one (or an earlier connection of its own
	// incarnation) replaced; guarded by connRegistry.mu.
	displaced string
}

func (c *workerConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// connLog adds the connection's identity to the logger of the part that logs about it.
func (c *workerConn) connLog(part zerolog.Logger) zerolog.Logger {
	return part.With().Uint64("conn_id", c.id).Str("worker_id", c.setup.WorkerID).
		Str("incarnation", c.setup.Incarnation).Str("ring", c.setup.Ring().String()).Logger()
}

// close closes the connection's net.Conn (see silenceListener); rsocket-go notices and closes the
// socket, which fires connClosed.
func (c *workerConn) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	if c.closeConn != nil {
		c.closeConn() // false: already closed, and rsocket-go is tearing the socket down
		return
	}
	_ = c.socket.Close()
}

// streamList returns the connection's open lease streams.
func (c *workerConn) streamList() []*leaseStream {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*leaseStream, 0, len(c.streams))
	for s := range c.streams {
		out = append(out, s)
	}
	return out
}

func (c *workerConn) state() leader.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return leader.Conn{Ring: c.setup.Ring()}
	}
	streaming := false
	for s := range c.streams {
		streaming = streaming || !s.hasLeft()
	}
	return leader.Conn{Ring: c.setup.Ring(), Live: !c.ended, Streaming: streaming}
}

// connRegistry holds the connections of this node. Per (ring, worker id) only the newest
// connection counts: a reconnect after a network blip replaces the old connection (which is
// closed) instead of being refused, and a new incarnation's connection replaces the old
// incarnation's (but never the other way round; see retiredSet).
type connRegistry struct {
	nextID  atomic.Uint64
	changed func()
	retired func(memberID) bool

	mu       sync.Mutex
	byWorker map[memberID]*workerConn // Incarnation empty in the key
	all      map[*workerConn]struct{}
}

func newConnRegistry(changed func(), retired func(memberID) bool) *connRegistry {
	return &connRegistry{changed: changed, retired: retired, byWorker: map[memberID]*workerConn{}, all: map[*workerConn]struct{}{}}
}

func workerKey(m memberID) memberID { return memberID{Ring: m.Ring, WorkerID: m.WorkerID} }

// add registers c and returns the connection it replaced, if any (the caller closes it). A
// connection of another incarnation replaces the current one: a new incarnation is a new process
// and supersedes the old one (docs/protocol.md). Two rules keep the older process from taking the
// place back, which would make the two take it from each other on every reconnect and never let
// the leader commit the newer one's Join:
//   - a connection of a superseded incarnation (retiredSet: the state showed a newer one) never
//     becomes current, even while the newer incarnation is between two connections;
//   - before that Join is applied, the incarnation a connection displaced does not displace it
//     (nor its reconnects) in turn: it is kept aside, and becomes current only if the newer
//     incarnation's connection ends first (remove).
//
// A connection kept aside is registered: its requests are answered, its stream gets what the
// state gives its member (nothing once it is superseded).
func (r *connRegistry) add(c *workerConn) *workerConn {
	r.mu.Lock()
	r.all[c] = struct{}{}
	if r.retired(c.member) {
		r.mu.Unlock()
		return nil
	}
	key := workerKey(c.member)
	old := r.byWorker[key]
	if old != nil {
		switch {
		case old.member.Incarnation == c.member.Incarnation:
			c.displaced = old.displaced // a reconnect keeps its place and what it displaced
		case old.displaced == c.member.Incarnation:
			r.mu.Unlock()
			return nil
		default:
			c.displaced = old.member.Incarnation
		}
	}
	r.byWorker[key] = c
	r.mu.Unlock()
	r.changed()
	return old
}

// remove forgets c; it reports whether c was the current connection of its worker. When it was,
// the newest connection of the same worker id kept aside, if it is not superseded, becomes current:
// the older process whose place a newer one took before its Join, and that then went away, goes
// on instead of being left connected and never streamed.
func (r *connRegistry) remove(c *workerConn) bool {
	r.mu.Lock()
	delete(r.all, c)
	key := workerKey(c.member)
	current := r.byWorker[key] == c
	if current {
		delete(r.byWorker, key)
		var next *workerConn
		for o := range r.all {
			if workerKey(o.member) == key && !o.isClosed() && !r.retired(o.member) && (next == nil || o.id > next.id) {
				next = o
			}
		}
		if next != nil {
			next.displaced = ""
			r.byWorker[key] = next
		}
	}
	r.mu.Unlock()
	r.changed()
	return current
}

// states returns the connection state of every member that has a current connection and was not
// superseded: a connection that was current when a newer incarnation's Join applied counts for
// nothing from then on, so the leader never joins its member again.
func (r *connRegistry) states() map[memberID]leader.Conn {
	r.mu.Lock()
	conns := make([]*workerConn, 0, len(r.byWorker))
	for _, c := range r.byWorker {
		if !r.retired(c.member) {
			conns = append(conns, c)
		}
	}
	r.mu.Unlock()
	out := make(map[memberID]leader.Conn, len(conns))
	for _, c := range conns {
		out[c.member] = c.state()
	}
	return out
}

// obeysControls tells, for every member with a current connection, whether its SETUP announced
// lease.FeatureControls.
func (r *connRegistry) obeysControls() map[memberID]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[memberID]bool, len(r.byWorker))
	for _, c := range r.byWorker {
		out[c.member] = c.setup.Has(lease.FeatureControls)
	}
	return out
}

// snapshot returns every registered connection.
func (r *connRegistry) snapshot() []*workerConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*workerConn, 0, len(r.all))
	for c := range r.all {
		out = append(out, c)
	}
	return out
}

func newMemberID(s lease.Setup) memberID {
	return memberID{Ring: fsm.RingID(s.Ring()), WorkerID: s.WorkerID, Incarnation: s.Incarnation}
}
