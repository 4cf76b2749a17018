package fsm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"
	"github.com/rs/zerolog"
)

// FSM adapts State to raft.FSM. Reads go through View, which holds a read lock; Changed signals
// (coalesced) after every applied entry so that the leader can plan and stream.
type FSM struct {
	log zerolog.Logger

	mu       sync.RWMutex
	state    *State
	applied  uint64
	changed  chan struct{}
	skipped  uint64
	rejected uint64
}

// New returns an FSM over an empty state.
func New(log zerolog.Logger) *FSM {
	return &FSM{log: log, state: NewState(), changed: make(chan struct{}, 1)}
}

// Apply implements raft.FSM. Its response is nil or the error Apply returned (the state unchanged).
func (f *FSM) Apply(l *raft.Log) interface{} {
	if l.Type != raft.LogCommand {
		return nil
	}
	c, err := Decode(l.Data)
	f.mu.Lock()
	defer f.notify()
	defer f.mu.Unlock()
	f.applied = l.Index
	if err != nil {
		// A newer node's command or a corrupt one: skip it, never stop the node.
		f.skipped++
		f.log.Warn().Err(err).Uint64("index", l.Index).Msg("skipped log entry")
		return err
	}
	if err := f.state.Apply(c); err != nil {
		f.rejected++
		f.log.Debug().Err(err).Uint64("index", l.Index).Msg("command refused")
		return err
	}
	return nil
}

func (f *FSM) notify() {
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// Changed receives a value after one or more entries were applied.
func (f *FSM) Changed() <-chan struct{} { return f.changed }

// View runs fn with the state under a read lock. fn must not keep references into the state.
func (f *FSM) View(fn func(s *State, appliedIndex uint64)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.state, f.applied)
}

// Snapshot implements raft.FSM: a deep copy taken under the lock, written out later.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return &snapshot{state: f.state.Clone()}, nil
}

// Restore implements raft.FSM.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st, err := ReadSnapshot(rc)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.state = st
	f.mu.Unlock()
	f.notify()
	return nil
}

// snapshotFormat is the first field of every snapshot, so that a format change can be recognized.
const snapshotFormat = 1

type snapshotFile struct {
	Format int    `json:"format"`
	State  *State `json:"state"`
}

type snapshot struct{ state *State }

// WriteSnapshot writes a state in the snapshot format.
func WriteSnapshot(w io.Writer, s *State) error {
	return json.NewEncoder(w).Encode(snapshotFile{Format: snapshotFormat, State: s})
}

// ReadSnapshot reads a state written by WriteSnapshot.
func ReadSnapshot(r io.Reader) (*State, error) {
	var file snapshotFile
	if err := json.NewDecoder(r).Decode(&file); err != nil {
		return nil, fmt.Errorf("fsm: read snapshot: %w", err)
	}
	if file.Format != snapshotFormat || file.State == nil {
		return nil, errors.New("fsm: read snapshot: unknown format")
	}
	st := file.State
	if st.Coordinators == nil {
		st.Coordinators = map[string]*Coordinator{}
	}
	if st.Rings == nil {
		st.Rings = map[string]*Ring{}
	}
	for _, r := range st.Rings {
		if r.Members == nil {
			r.Members = map[string]*Member{}
		}
	}
	return st, nil
}

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := WriteSnapshot(sink, s.state); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *snapshot) Release() {}
