package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/lease"
)

// stepDownWait bounds how long the old leader waits to see who took over, after Raft confirmed
// the transfer, before it answers without naming the new leader.
const stepDownWait = 10 * time.Second

// stepDown hands the lead over (admin.Changer's StepDown, POST admin.PathStepDown) with Raft's
// leadership transfer, to the named voter or to the one Raft picks, and says who took over once it
// sees it; admin.ErrNotLeading when this node is not Raft's leader, and admin forwards. Its leader
// term ends like on any lost election: workers follow the new leader, whose renewals keep every
// lease (invariant 4).
func (n *Node) stepDown(ctx context.Context, to string) (admin.StepDownAnswer, error) {
	if n.raft == nil || n.raft.State() != raft.Leader {
		return admin.StepDownAnswer{}, admin.ErrNotLeading
	}
	start := n.clock.Now()
	var future raft.Future
	if to == "" {
		future = n.raft.LeadershipTransfer()
	} else {
		addr, ok := n.voterAddr(to)
		switch {
		case to == n.cfg.NodeID:
			return admin.StepDownAnswer{}, fmt.Errorf("%w: %s already leads; name another voter, or none", lease.ErrBadRequest, to)
		case !ok:
			return admin.StepDownAnswer{}, fmt.Errorf("%w: %q is not a voter of the raft configuration", lease.ErrBadRequest, to)
		}
		future = n.raft.LeadershipTransferToServer(raft.ServerID(to), addr)
	}
	if err := n.awaitFuture(future); err != nil {
		return admin.StepDownAnswer{}, fmt.Errorf("%w: leadership transfer from %s failed: %w", lease.ErrUnavailable, n.cfg.NodeID, err)
	}
	ans := admin.StepDownAnswer{PreviousLeader: n.cfg.NodeID}
	deadline := time.Now().Add(stepDownWait)
	for {
		_, lid := n.raft.LeaderWithID()
		if lid != "" && string(lid) != n.cfg.NodeID {
			ans.LeaderID = string(lid)
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		select {
		case <-time.After(5 * time.Millisecond):
		case <-n.stop:
			return admin.StepDownAnswer{}, fmt.Errorf("%w: %s is shutting down", lease.ErrUnavailable, n.cfg.NodeID)
		}
	}
	ans.Term, ans.TookMs = n.raft.CurrentTerm(), n.clock.Now().Sub(start).Milliseconds()
	return ans, nil
}

// voterAddr is the Raft address of the voter id of the configuration.
func (n *Node) voterAddr(id string) (raft.ServerAddress, bool) {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return "", false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id && s.Suffrage == raft.Voter {
			return s.Address, true
		}
	}
	return "", false
}
