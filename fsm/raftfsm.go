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
//
// It is fail-stop: an entry of a type or body version its FSM version does not know halts it
// (Halted). It then applies nothing more and takes no snapshot (raft would record the halted
// state as the state at a later index, and the entries in between would never be applied), until
// a snapshot from a node that knew the entry is restored, or the node restarts on a build that
// knows it and replays the log. A malformed entry of a known type is refused instead, like any
// command Apply refuses: every node of this version decides that alike.
type FSM struct {
	log     zerolog.Logger
	version int

	mu       sync.RWMutex
	state    *State
	applied  uint64
	changed  chan struct{}
	skipped  uint64
	rejected uint64
	halted   error
	observe  func(*State, Command)
}

// New returns an FSM of this build's Version over an empty state.
func New(log zerolog.Logger) *FSM { return NewAt(log, Version) }

// NewAt returns an FSM that knows what FSM version v knew and nothing later, as a node built at
// version v: what tests of a rolling upgrade run their old nodes with. v is at most Version.
func NewAt(log zerolog.Logger, v int) *FSM {
	return &FSM{log: log, version: min(max(v, 1), Version), state: NewState(), changed: make(chan struct{}, 1)}
}

// Observe makes fn see the state after every entry that changed it, with the command it applied
// (an InTerm's inner command), and after every restored snapshot (c nil), under the write lock,
// before anything else can apply or read. It is for what a node must learn from each state in
// turn rather than from the coalesced Changed signal: a supersede that one entry shows and the
// next hides (the newer incarnation forgotten again) is seen. The command lets fn skip the entries
// that cannot show what it looks for. fn must be quick, must not keep references into the state
// and must not call back into the FSM. Set it before the FSM is handed to Raft.
func (f *FSM) Observe(fn func(s *State, c Command)) { f.observe = fn }

// Version is the FSM version this FSM runs.
func (f *FSM) Version() int { return f.version }

// Halted returns the reason this FSM stopped applying the log (wrapping ErrUnknownCommand and
// naming the entry), or nil while it applies.
func (f *FSM) Halted() error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.halted
}

// Apply implements raft.FSM. Its response is nil or the error Apply returned (the state unchanged).
// An InTerm entry is applied only when the entry's Raft term is the command's (ErrStaleTerm).
func (f *FSM) Apply(l *raft.Log) interface{} {
	if l.Type != raft.LogCommand {
		return nil
	}
	f.mu.Lock()
	defer f.notify()
	defer f.mu.Unlock()
	if f.halted != nil {
		return fmt.Errorf("%w: entry %d not applied: %w", ErrHalted, l.Index, f.halted)
	}
	c, err := decodeAt(l.Data, f.version)
	if in, ok := c.(*InTerm); ok && err == nil {
		c, err = in.open(l.Term, f.version)
	}
	if errors.Is(err, ErrUnknownCommand) {
		f.halted = fmt.Errorf("entry %d: %w", l.Index, err)
		f.log.Error().Err(err).Uint64("index", l.Index).Int("fsm_version", f.version).
			Msg("stopped applying the log: a newer coordinator proposed a command this node does not know; run a build that knows it")
		return err
	}
	f.applied = l.Index
	if errors.Is(err, ErrStaleTerm) {
		// Every node sees the same term in the entry: every node refuses it alike.
		f.rejected++
		f.log.Info().Err(err).Uint64("index", l.Index).Msg("command of an ended leadership stretch refused")
		return err
	}
	if err != nil {
		// Malformed: every node of this version refuses it alike.
		f.skipped++
		f.log.Warn().Err(err).Uint64("index", l.Index).Msg("skipped malformed log entry")
		return err
	}
	if err := f.state.Apply(c); err != nil {
		f.rejected++
		f.log.Debug().Err(err).Uint64("index", l.Index).Msg("command refused")
		return err
	}
	if f.observe != nil {
		f.observe(f.state, c)
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

// Snapshot implements raft.FSM: a deep copy taken under the lock, written out later. A halted
// FSM refuses: its state is not the state at the index raft would record.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.halted != nil {
		return nil, fmt.Errorf("%w: no snapshot: %w", ErrHalted, f.halted)
	}
	return &snapshot{state: f.state.Clone()}, nil
}

// Restore implements raft.FSM. A snapshot is a whole state at an index, so restoring one ends a
// halt: what the unknown entry did is in it, or it is of a format this FSM refuses.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st, err := readSnapshotAt(rc, f.version)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.state, f.halted = st, nil
	if f.observe != nil {
		f.observe(f.state, nil)
	}
	f.mu.Unlock()
	f.notify()
	return nil
}

// snapshotFile is a snapshot. Format is the FSM version its state needs (State.formatVersion), so
// that a node of an older version refuses one holding what it would silently drop.
type snapshotFile struct {
	Format int    `json:"format"`
	State  *State `json:"state"`
}

type snapshot struct{ state *State }

// WriteSnapshot writes a state in the snapshot format.
func WriteSnapshot(w io.Writer, s *State) error {
	return json.NewEncoder(w).Encode(snapshotFile{Format: s.formatVersion(), State: s})
}

// ReadSnapshot reads a state written by WriteSnapshot, as a node of this build's Version does.
func ReadSnapshot(r io.Reader) (*State, error) { return readSnapshotAt(r, Version) }

func readSnapshotAt(r io.Reader, v int) (*State, error) {
	var file snapshotFile
	if err := json.NewDecoder(r).Decode(&file); err != nil {
		return nil, fmt.Errorf("fsm: read snapshot: %w", err)
	}
	if file.Format < 1 || file.Format > v || file.State == nil {
		return nil, fmt.Errorf("fsm: read snapshot: format %d, this node reads formats 1 to %d", file.Format, v)
	}
	st := file.State
	if st.Coordinators == nil {
		st.Coordinators = map[string]*Coordinator{}
	}
	if st.Rings == nil {
		st.Rings = map[string]*Ring{}
	}
	if err := fillMaps(st); err != nil {
		return nil, fmt.Errorf("fsm: read snapshot: %w", err)
	}
	return st, nil
}

// fillMaps gives every ring a members map and refuses null entries, which JSON allows and every
// reader of the state would dereference.
func fillMaps(st *State) error {
	for id, c := range st.Coordinators {
		if c == nil {
			return fmt.Errorf("coordinator %q is null", id)
		}
	}
	for id, r := range st.Rings {
		if r == nil {
			return fmt.Errorf("ring %q is null", id)
		}
		if r.Members == nil {
			r.Members = map[string]*Member{}
		}
		if r.Movement != nil {
			// Plan builds a planner from it and could not go on without one.
			if err := r.Movement.Config().Validate(); err != nil {
				return fmt.Errorf("ring %q: movement setting: %w", id, err)
			}
		}
		for key, m := range r.Members {
			if m == nil {
				return fmt.Errorf("member %q of ring %q is null", key, id)
			}
		}
	}
	return nil
}

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := WriteSnapshot(sink, s.state); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *snapshot) Release() {}
