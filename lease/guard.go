package lease

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Errors of the guard. The data plane stops the current operation on any of them and must not
// touch Cassandra or execute anything until a new lease arrives.
var (
	// ErrNoLease means the worker holds no lease yet (or released it).
	ErrNoLease = errors.New("lease: no lease held")
	// ErrLeaseExpired means the lease's TTL has run out on the worker's clock: the TimeWindowGuard
	// refuses every query and execution.
	ErrLeaseExpired = errors.New("lease: lease expired")
	// ErrLeaseTooShort means the lease is still valid but not for long enough to finish the
	// operation (its timeout plus the guard's margin) inside it.
	ErrLeaseTooShort = errors.New("lease: lease ends before the operation could finish")
	// ErrTokenNotLeased means the token is outside the ranges of the current lease.
	ErrTokenNotLeased = errors.New("lease: token not in the current lease")
	// ErrNotNode0 means the operation is reserved to Node-0 and this worker is not Node-0.
	ErrNotNode0 = errors.New("lease: not Node-0")
)

// Guard is the TimeWindowGuard: it holds the worker's current lease and answers, before every CQL
// query and every execution, whether that operation may start now. It is safe for concurrent use.
type Guard struct {
	clock  Clock
	margin time.Duration

	mu      sync.RWMutex
	current *Lease
	// floor is the newest epoch ever installed: an element older than it is never installed again,
	// even after Clear (a stale element arriving after a release must not revive the lease).
	floor uint64
}

// NewGuard returns a guard on clock that demands margin of lease validity beyond each operation's
// timeout.
func NewGuard(clock Clock, margin time.Duration) *Guard {
	if clock == nil {
		clock = SystemClock{}
	}
	return &Guard{clock: clock, margin: margin}
}

// Margin is the validity the guard demands beyond each operation's timeout.
func (g *Guard) Margin() time.Duration { return g.margin }

// Set installs a lease. An element of an older epoch than any installed before is ignored.
func (g *Guard) Set(l Lease) {
	l.Ranges = Normalize(l.Ranges)
	g.mu.Lock()
	defer g.mu.Unlock()
	if l.Epoch < g.floor {
		return
	}
	g.floor = l.Epoch
	g.current = &l
}

// Clear drops the lease: every check fails with ErrNoLease until the next Set.
func (g *Guard) Clear() {
	g.mu.Lock()
	g.current = nil
	g.mu.Unlock()
}

// Current returns the lease held, if any, whether or not it is still valid.
func (g *Guard) Current() (Lease, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.current == nil {
		return Lease{}, false
	}
	return *g.current, true
}

// Check returns the current lease if an operation that may take up to need can start now and finish
// inside it; otherwise ErrNoLease, ErrLeaseExpired or ErrLeaseTooShort.
func (g *Guard) Check(need time.Duration) (Lease, error) {
	l, ok := g.Current()
	if !ok {
		return Lease{}, ErrNoLease
	}
	left := l.Remaining(g.clock.Now())
	if left <= 0 {
		return Lease{}, fmt.Errorf("%w (epoch %d, %v ago)", ErrLeaseExpired, l.Epoch, -left)
	}
	if left < need+g.margin {
		return Lease{}, fmt.Errorf("%w (epoch %d: %v left, %v needed)", ErrLeaseTooShort, l.Epoch, left, need+g.margin)
	}
	return l, nil
}

// CheckToken is Check plus: token must lie in the lease's ranges.
func (g *Guard) CheckToken(token int64, need time.Duration) (Lease, error) {
	l, err := g.Check(need)
	if err != nil {
		return Lease{}, err
	}
	if !l.Ranges.Contains(token) {
		return Lease{}, fmt.Errorf("%w (token %d, epoch %d)", ErrTokenNotLeased, token, l.Epoch)
	}
	return l, nil
}

// CheckNode0 is Check plus: the lease must make this worker Node-0.
func (g *Guard) CheckNode0(need time.Duration) (Lease, error) {
	l, err := g.Check(need)
	if err != nil {
		return Lease{}, err
	}
	if !l.IsNode0() {
		return Lease{}, fmt.Errorf("%w (node index %d)", ErrNotNode0, l.NodeIndex)
	}
	return l, nil
}

// IsGuardError reports whether err came from the guard (the operation was refused, not failed).
func IsGuardError(err error) bool {
	return errors.Is(err, ErrNoLease) || errors.Is(err, ErrLeaseExpired) ||
		errors.Is(err, ErrLeaseTooShort) || errors.Is(err, ErrTokenNotLeased) || errors.Is(err, ErrNotNode0)
}
