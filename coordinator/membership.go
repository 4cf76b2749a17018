package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// errJoinUnchecked: the leader refused the fields by which a join is checked (dry_run,
// empty_log, replace) as unknown: it runs an older release.
var errJoinUnchecked = errors.New("the leader does not know the join's checks")

// Join timing: a joining node asks every joinRetry until it is in the configuration; a change
// of the configuration may take up to peerChangeTimeout (the leader replicates it to a quorum).
const (
	joinRetry         = 500 * time.Millisecond
	peerChangeTimeout = 10 * time.Second
)

// configuration is the Raft configuration as this node has it (admin.Changer's Configuration).
func (n *Node) configuration() ([]admin.RaftServerView, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("%w: read the raft configuration: %w", lease.ErrUnavailable, err)
	}
	var out []admin.RaftServerView
	for _, s := range f.Configuration().Servers {
		out = append(out, admin.RaftServerView{ID: string(s.ID), RaftAddr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out, nil
}

// addVoter adds a voter. Raft catches the new server up from a snapshot and the log; it
// registers its addresses itself once it is in the configuration. Adding a server that is a voter
// at that address already changes nothing. It never silently takes a voter's place (Raft's
// AddVoter would re-address a voter of the same id, evicting a healthy node for an impostor):
// a voter of that id at another address, or a registered voter of that id that asks to join again
// from an empty data directory (it may vote a second time in a term it voted in), is refused with
// admin.ErrPeerConflict unless the request says Replace.
func (n *Node) addVoter(p admin.PeerRequest) error {
	servers, err := n.configuration()
	if err != nil {
		return err
	}
	var have *admin.RaftServerView
	for i, s := range servers {
		if s.ID != p.ID && s.RaftAddr == p.RaftAddr {
			return fmt.Errorf("%w: raft address %s belongs to %s; remove that one first", lease.ErrBadRequest, p.RaftAddr, s.ID)
		}
		if s.ID == p.ID {
			have = &servers[i]
		}
	}
	if p.Replace {
		if p.ID == n.cfg.NodeID {
			return fmt.Errorf("%w: node id %s is the leader answering this call, so it is running: stop it (or ctl step-down and stop it) before replacing it",
				admin.ErrPeerConflict, p.ID)
		}
		if p.DryRun {
			return nil
		}
		return n.replaceVoter(p, have)
	}
	switch {
	case have == nil || !have.Voter:
	case have.RaftAddr != p.RaftAddr:
		return fmt.Errorf("%w: node id %s is a voter already, at %s; adding it at %s would evict that voter, so the cluster keeps it: "+
			"if the node at %s is gone for good, run `ctl remove-peer %s` first, or give --replace (docs/operations.md)",
			admin.ErrPeerConflict, p.ID, have.RaftAddr, p.RaftAddr, have.RaftAddr, p.ID)
	case p.EmptyLog && registered(n, p.ID):
		return fmt.Errorf("%w: node id %s is a voter at %s already, and asks to join from an empty data dir: a voter that lost its log could vote twice in one term; "+
			"if its data is lost for good, run `ctl remove-peer %s` first, or give --replace (docs/operations.md)",
			admin.ErrPeerConflict, p.ID, p.RaftAddr, p.ID)
	default:
		return nil
	}
	if p.DryRun {
		return nil
	}
	return configErr(n.awaitFuture(n.raft.AddVoter(raft.ServerID(p.ID), raft.ServerAddress(p.RaftAddr), 0, peerChangeTimeout)))
}

// replaceVoter makes the operator's replacement of a voter explicit: the old server of that id
// is removed with its registration before the new one is added, so that the new one starts as a
// server the cluster has never counted a vote from. The leader does not replace itself: it is
// running, since it answers (addVoter refuses that).
func (n *Node) replaceVoter(p admin.PeerRequest, have *admin.RaftServerView) error {
	// A voter at this very address that never registered is the replacement itself (a join asked
	// again before its answer arrived) or one an operator added: nothing to take out.
	fresh := have != nil && have.RaftAddr == p.RaftAddr && !registered(n, p.ID)
	if have != nil && !fresh {
		if err := n.removeVoter(admin.PeerRequest{ID: p.ID}); err != nil {
			return err
		}
		n.log.Warn().Str("peer_id", p.ID).Str("old_raft_addr", have.RaftAddr).Str("peer_raft_addr", p.RaftAddr).
			Msg("replacing a voter (--replace): removed the old one")
	}
	return configErr(n.awaitFuture(n.raft.AddVoter(raft.ServerID(p.ID), raft.ServerAddress(p.RaftAddr), 0, peerChangeTimeout)))
}

// registered reports whether the replicated state holds a registration of the coordinator id:
// it ran as a member of the cluster and applied its log. A voter that an operator added and that
// never started has none; it may join from an empty data directory.
func registered(n *Node, id string) bool {
	ok := false
	n.fsm.View(func(s *fsm.State, _ uint64) { _, ok = s.Coordinators[id] })
	return ok
}

// removeVoter takes a server out of the configuration and forgets its registration (its addresses
// would otherwise stay in the ring view and in no_leader lists). The leader removing itself
// forgets its registration first: it cannot commit anything once it is out.
func (n *Node) removeVoter(p admin.PeerRequest) error {
	servers, err := n.configuration()
	if err != nil {
		return err
	}
	in, voters := false, 0
	for _, s := range servers {
		in = in || s.ID == p.ID
		if s.Voter {
			voters++
		}
	}
	if in && voters <= 1 {
		return fmt.Errorf("%w: %s is the last voter; a cluster cannot remove its last voter", lease.ErrBadRequest, p.ID)
	}
	forget := func() error { return n.apply(&fsm.RemoveCoordinator{ID: p.ID}) }
	if p.ID == n.cfg.NodeID {
		n.leaving.Store(true)
		if err := forget(); err != nil {
			n.leaving.Store(false)
			return err
		}
		if err := configErr(n.awaitFuture(n.raft.RemoveServer(raft.ServerID(p.ID), 0, peerChangeTimeout))); err != nil {
			n.leaving.Store(false)
			return err
		}
		return nil
	}
	if in {
		if err := configErr(n.awaitFuture(n.raft.RemoveServer(raft.ServerID(p.ID), 0, peerChangeTimeout))); err != nil {
			return err
		}
	}
	return forget()
}

// configErr maps a configuration change's error to the admin API's.
func configErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: the leader changed during the configuration change; it may or may not be made (it is idempotent): retry: %w", lease.ErrNoLeader, err)
	default:
		return fmt.Errorf("%w: configuration change: %w", lease.ErrUnavailable, err)
	}
}

// joinLoop runs on a node started with Join (the join: admin.PathJoin) until the node is in the Raft configuration: it asks
// each given coordinator in turn to add it (a follower forwards to the leader). Such a node never
// bootstraps (startRaft), so until then it neither votes nor stands for election.
func (n *Node) joinLoop() {
	client := n.peerHTTPClient(peerChangeTimeout + 2*time.Second)
	req := admin.PeerRequest{ID: n.cfg.NodeID, RaftAddr: n.raftAddr, Replace: n.cfg.Replace, EmptyLog: n.emptyLog}
	// A node with an empty data directory takes Raft traffic only once the leader said it would
	// add it (streamLayer.gate): refused, it has voted in no term of the cluster.
	gateOpen := !n.emptyLog
	for i := 0; ; i++ {
		if n.inConfiguration(n.cfg.NodeID) {
			n.log.Info().Msg("in the raft configuration: joined")
			n.openRaftGate()
			return
		}
		addr := n.cfg.Join[i%len(n.cfg.Join)]
		req.DryRun = !gateOpen
		body, _ := json.Marshal(req)
		err := n.askToJoin(client, addr, body, req.DryRun)
		if err == nil {
			if !gateOpen {
				n.openRaftGate()
				gateOpen = true
			}
			continue // check the configuration at once: the leader replicates it to this node
		}
		if errors.Is(err, errJoinUnchecked) && req != (admin.PeerRequest{ID: req.ID, RaftAddr: req.RaftAddr}) {
			// A leader of an older release knows none of the new fields: join as that release
			// does, unchecked, rather than not at all during a rolling upgrade.
			n.log.Warn().Err(err).Str("join_addr", addr).Msg("the leader cannot check this join (an older release): joining unchecked")
			req = admin.PeerRequest{ID: req.ID, RaftAddr: req.RaftAddr}
			n.openRaftGate()
			gateOpen = true
			continue
		}
		if errors.Is(err, ErrJoinRefused) {
			n.log.Error().Err(err).Str("join_addr", addr).Msg("join refused; stopping")
			n.fail(err)
			return
		}
		n.log.Warn().Err(err).Str("join_addr", addr).Msg("join request failed; retrying")
		select {
		case <-n.stop:
			return
		case <-time.After(joinRetry):
		}
	}
}

func (n *Node) askToJoin(client *http.Client, addr string, body []byte, dryRun bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), peerChangeTimeout+2*time.Second)
	defer cancel()
	go func() {
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.peerURL(addr, admin.PathJoin), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	n.signInternal(req)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		var we lease.WireError
		_ = json.Unmarshal(answer, &we)
		if resp.StatusCode == http.StatusConflict && we.Code == admin.CodePeerConflict {
			return fmt.Errorf("%w by %s: %s", ErrJoinRefused, addr, we.Message)
		}
		if resp.StatusCode == http.StatusBadRequest && strings.Contains(we.Message, "unknown field") {
			return fmt.Errorf("%w: %s answered %s: %s", errJoinUnchecked, addr, resp.Status, we.Message)
		}
		return fmt.Errorf("%s answered %s: %s", addr, resp.Status, strings.TrimSpace(string(answer)))
	}
	if dryRun {
		return nil
	}
	// Wait a moment for the configuration entry to reach this node before asking again.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && !n.inConfiguration(n.cfg.NodeID) {
		select {
		case <-n.stop:
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// inConfiguration reports whether id is a server of the Raft configuration.
func (n *Node) inConfiguration(id string) bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == raft.ServerID(id) {
			return true
		}
	}
	return false
}
