package coordinator

import (
	"context"
	"net/http"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
)

// adminNode is the node as package admin sees it (admin.Node, and admin.Changer for the calls
// that change something): an adapter rather than methods of Node, so that what the admin API may
// ask of a coordinator is this list and no more.
type adminNode struct{ n *Node }

func (a adminNode) ID() string { return a.n.cfg.NodeID }

func (a adminNode) View() admin.RingView { return a.n.View() }

func (a adminNode) Now() time.Time { return a.n.clock.Now() }

func (a adminNode) BacklogSamples() map[string][]admin.BacklogSample {
	if t := a.n.currentTerm(); t != nil {
		return t.backlog.series()
	}
	return nil
}

func (a adminNode) Readiness() admin.Readiness { return a.n.readiness() }

func (a adminNode) Authorize(w http.ResponseWriter, r *http.Request) bool {
	return a.n.authorizeHTTP(w, r)
}

func (a adminNode) Leads() bool {
	t := a.n.currentTerm()
	return t != nil && t.isReady()
}

func (a adminNode) Commit(c admin.Change) (admin.Committed, error) { return a.n.commitChange(c) }

func (a adminNode) Forward(r *http.Request, body []byte) (admin.Forwarded, error) {
	return a.n.forward(r, body)
}

func (a adminNode) AddVoter(p admin.PeerRequest) error { return a.n.addVoter(p) }

func (a adminNode) RemoveVoter(p admin.PeerRequest) error { return a.n.removeVoter(p) }

func (a adminNode) Configuration() ([]admin.RaftServerView, error) { return a.n.configuration() }

func (a adminNode) StepDown(ctx context.Context, to string) (admin.StepDownAnswer, error) {
	return a.n.stepDown(ctx, to)
}
