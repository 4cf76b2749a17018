package coordinator

import (
	"fmt"
	"sort"
	"strings"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// ringOfWorker is the one ring that has a member of the worker id, in this node's state.
func (n *Node) ringOfWorker(workerID string) (lease.RingKey, error) {
	var rings []lease.RingKey
	n.fsm.View(func(s *fsm.State, _ uint64) {
		for _, r := range s.Rings {
			for _, m := range r.Members {
				if m.WorkerID == workerID {
					rings = append(rings, r.Key)
					break
				}
			}
		}
	})
	switch len(rings) {
	case 0:
		return lease.RingKey{}, fmt.Errorf("%w: no worker %q in any ring", lease.ErrUnknownWorker, workerID)
	case 1:
		return rings[0], nil
	}
	names := make([]string, len(rings))
	for i, k := range rings {
		names[i] = k.String()
	}
	sort.Strings(names)
	return lease.RingKey{}, fmt.Errorf("%w: worker %q is in %d rings (%s): name one", lease.ErrBadRequest, workerID, len(rings), strings.Join(names, ", "))
}
