package coordinator

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"

	"github.com/retryring/retryring/fsm"
)

// Recovery from a lost quorum, in the manner of Consul's and rqlite's peers.json: the operator
// stops the surviving coordinators, writes the configuration they are to form into each one's
// data directory (PeersFile, the JSON hashicorp/raft reads: [{"id","address","non_voter"}]) or
// gives it with --peers, and starts them with --recover. raft.RecoverCluster then replays what
// the node kept, writes a snapshot and a new configuration into the log, and the node starts as
// a member of that configuration alone. The first leader of the recovered cluster settles it
// (settle.go): it waits out every lease that may still be alive and lifts every epoch above what
// the lost entries may have sent.
const (
	// PeersFile is the recovery configuration in the data directory.
	PeersFile = "peers.json"
	// peersFileDone is what PeersFile is renamed to once applied, so that a restart does not
	// apply it again.
	peersFileDone = "peers.json.applied"
	// recoveredMarker tells the node, across restarts, that its state was recovered and its first
	// term as leader must settle it; removed once the settling floor is committed.
	recoveredMarker = "recovered"
)

// recoverCluster rewrites the Raft configuration of this node's stored state. Why a throwaway
// FSM: RecoverCluster leaves the FSM it replays into unusable (hashicorp/raft's doc), and the
// node's own FSM is restored by NewRaft from the snapshot it wrote.
func (n *Node) recoverCluster(rc *raft.Config, logs raft.LogStore, store raft.StableStore, snaps raft.SnapshotStore, trans raft.Transport) error {
	conf, source, err := n.recoveryConfiguration()
	if err != nil {
		return err
	}
	// A provisional marker first: a crash after RecoverCluster rewrote the log but before the real
	// marker is written must still leave a node that settles when it starts again without
	// --recover. No floor is above MaxUint64, so it reads as recovered until a settling floor
	// clears it.
	provisional, _ := json.Marshal(recoveryMarker{From: source, EpochFloor: math.MaxUint64})
	if err := os.WriteFile(filepath.Join(n.cfg.DataDir, recoveredMarker), append(provisional, '\n'), 0o640); err != nil {
		return fmt.Errorf("coordinator: --recover: %w", err)
	}
	scratch := fsm.NewAt(n.partLog("recover"), n.fsm.Version())
	if err := raft.RecoverCluster(rc, scratch, logs, store, snaps, trans, conf); err != nil {
		return fmt.Errorf("coordinator: --recover: %w", err)
	}
	// The marker keeps the recovered state's floor: every survivor recovered with it carries one,
	// and the first of them to lead settles the cluster (a floor above this one); the others see
	// that floor and drop their markers instead of settling a healthy cluster again.
	var floor uint64
	scratch.View(func(s *fsm.State, _ uint64) { floor = s.EpochFloor })
	marker, _ := json.Marshal(recoveryMarker{From: source, EpochFloor: floor})
	if err := os.WriteFile(filepath.Join(n.cfg.DataDir, recoveredMarker), append(marker, '\n'), 0o640); err != nil {
		return fmt.Errorf("coordinator: --recover: %w", err)
	}
	if source == PeersFile {
		if err := os.Rename(filepath.Join(n.cfg.DataDir, PeersFile), filepath.Join(n.cfg.DataDir, peersFileDone)); err != nil {
			return fmt.Errorf("coordinator: --recover: %w", err)
		}
	}
	n.log.Warn().Str("from", source).Interface("configuration", conf.Servers).
		Msg("recovered the raft configuration; the first leader waits out every lease before it assigns anything")
	return nil
}

// recoveryConfiguration is the configuration to recover into: PeersFile in the data directory,
// else Peers, else this node alone. It must name this node as a voter.
func (n *Node) recoveryConfiguration() (raft.Configuration, string, error) {
	path := filepath.Join(n.cfg.DataDir, PeersFile)
	var conf raft.Configuration
	source := PeersFile
	switch _, err := os.Stat(path); {
	case err == nil:
		c, err := raft.ReadConfigJSON(path)
		if err != nil {
			return conf, "", fmt.Errorf("%w: --recover: %s: %w", ErrBadConfig, path, err)
		}
		conf = c
	case len(n.cfg.Peers) > 0:
		conf, source = n.bootstrapConfiguration(), "--peers"
	default:
		conf, source = n.bootstrapConfiguration(), "this node alone"
	}
	for _, s := range conf.Servers {
		if s.ID == raft.ServerID(n.cfg.NodeID) && s.Suffrage == raft.Voter {
			return conf, source, nil
		}
	}
	return conf, "", fmt.Errorf("%w: --recover: the configuration from %s does not name this node (%s) as a voter", ErrBadConfig, source, n.cfg.NodeID)
}

// recoveryMarker is the content of the recovered marker file.
type recoveryMarker struct {
	From string `json:"from"`
	// EpochFloor is the recovered state's floor: a floor above it was committed after the
	// recovery, by a leader that settled the cluster.
	EpochFloor uint64 `json:"epoch_floor"`
}

// recoveredMarker reports whether this node's state was recovered and the cluster not yet settled
// since: the marker is there and the state's floor is not above the one it recorded (an
// unreadable marker counts as a recovery: settling again costs a wait, never safety). A marker
// that a settling leader made obsolete is removed.
func (n *Node) recoveredMarker() bool {
	b, err := os.ReadFile(filepath.Join(n.cfg.DataDir, recoveredMarker))
	if err != nil {
		return false
	}
	var m recoveryMarker
	if json.Unmarshal(b, &m) != nil {
		return true
	}
	var floor uint64
	n.fsm.View(func(s *fsm.State, _ uint64) { floor = s.EpochFloor })
	if floor > m.EpochFloor {
		n.clearRecoveredMarker()
		return false
	}
	return true
}

func (n *Node) clearRecoveredMarker() {
	if err := os.Remove(filepath.Join(n.cfg.DataDir, recoveredMarker)); err != nil && !errors.Is(err, os.ErrNotExist) {
		n.log.Warn().Err(err).Msg("could not remove the recovery marker: a later term settles again (harmless)")
	}
}
