package fsm

import (
	"fmt"
	"slices"

	"github.com/retryring/retryring/lease"
)

// Cordon sets, or with Clear lifts, the cordon of a worker id in a ring. A cordoned worker stays a
// member, connected and reporting, but Plan gives it no range and not Node-0: it drains as its
// ranges move to the others by the normal safe path (its release, or the expiry of its lease).
//
// The cordon is kept by worker id, not by incarnation, so that a restart of the process (a new
// incarnation that supersedes the old one) stays cordoned. It lasts while a member of that worker
// id is in the ring: once the last one left or was forgotten, the cordon goes with it, so the
// replicated state never keeps names of workers that are gone.
type Cordon struct {
	Ring     lease.RingKey `json:"ring"`
	WorkerID string        `json:"worker_id"`
	Clear    bool          `json:"clear,omitempty"`
}

// Type implements Command.
func (Cordon) Type() CommandType { return TypeCordon }

// maxWorkerIDBytes bounds a worker id, as the SETUP frame does.
const maxWorkerIDBytes = 256

// Validate refuses a cordon that names no ring or no worker id.
func (c Cordon) Validate() error {
	if err := validateRing(c.Ring); err != nil {
		return err
	}
	if c.WorkerID == "" || len(c.WorkerID) > maxWorkerIDBytes {
		return fmt.Errorf("%w: worker id: 1 to %d bytes, got %d", ErrMalformed, maxWorkerIDBytes, len(c.WorkerID))
	}
	return nil
}

// applyCordon sets or clears the cordon. A worker id with no member in the ring is refused with
// ErrUnknownMember, except a clear of one that is still cordoned (it cannot be: the cordon goes
// with the last member); a clear of a worker that is not cordoned changes nothing.
func (s *State) applyCordon(c *Cordon) error {
	if err := c.Validate(); err != nil {
		return err
	}
	r := s.Ring(c.Ring)
	if r == nil || !r.hasWorker(c.WorkerID) {
		return fmt.Errorf("%w: no worker %q in ring %s", ErrUnknownMember, c.WorkerID, c.Ring)
	}
	i, found := slices.BinarySearch(r.Cordoned, c.WorkerID)
	switch {
	case c.Clear && found:
		r.Cordoned = slices.Delete(r.Cordoned, i, i+1)
		if len(r.Cordoned) == 0 {
			r.Cordoned = nil
		}
	case !c.Clear && !found:
		r.Cordoned = slices.Insert(r.Cordoned, i, c.WorkerID)
	}
	return nil
}

// IsCordoned reports whether the worker id is cordoned in the ring.
func (r *Ring) IsCordoned(workerID string) bool {
	_, found := slices.BinarySearch(r.Cordoned, workerID)
	return found
}

// hasWorker reports whether any incarnation of workerID is a member of the ring.
func (r *Ring) hasWorker(workerID string) bool {
	for _, m := range r.Members {
		if m.WorkerID == workerID {
			return true
		}
	}
	return false
}

// pruneCordons drops the cordons of worker ids that have no member left in the ring.
func (r *Ring) pruneCordons() {
	if len(r.Cordoned) == 0 {
		return
	}
	r.Cordoned = slices.DeleteFunc(r.Cordoned, func(id string) bool { return !r.hasWorker(id) })
	if len(r.Cordoned) == 0 {
		r.Cordoned = nil
	}
}

// EligibleMembers returns the active members that may be given ranges and Node-0 (active and not
// cordoned), in join order.
func (r *Ring) EligibleMembers() []*Member {
	return slices.DeleteFunc(r.ActiveMembers(), func(m *Member) bool { return r.IsCordoned(m.WorkerID) })
}
