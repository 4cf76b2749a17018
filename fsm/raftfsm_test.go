package fsm_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/rs/zerolog"
	"pgregory.net/rapid"

	"github.com/retryring/retryring/fsm"
)

// memSink is an in-memory raft.SnapshotSink.
type memSink struct {
	bytes.Buffer
	writeErr          error
	closed, cancelled bool
}

func (s *memSink) ID() string { return "mem" }

func (s *memSink) Write(p []byte) (int, error) {
	if s.writeErr != nil {
		return 0, s.writeErr
	}
	return s.Buffer.Write(p)
}

func (s *memSink) Close() error  { s.closed = true; return nil }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }

// closeTracker is a snapshot reader that remembers being closed.
type closeTracker struct {
	io.Reader
	closed bool
}

func (c *closeTracker) Close() error { c.closed = true; return nil }

func fsmJSON(tb failer, f *fsm.FSM) (string, uint64) {
	tb.Helper()
	var out string
	var idx uint64
	f.View(func(s *fsm.State, applied uint64) {
		out, idx = stateJSON(tb, s), applied
	})
	return out, idx
}

func commandLog(tb failer, index uint64, c fsm.Command) *raft.Log {
	tb.Helper()
	b, err := fsm.Encode(c)
	if err != nil {
		tb.Fatalf("encode: %v", err)
	}
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: b}
}

// persist takes a snapshot of f and writes it out through a fake sink.
func persist(tb failer, f *fsm.FSM) []byte {
	tb.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		tb.Fatalf("snapshot: %v", err)
	}
	defer snap.Release()
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		tb.Fatalf("persist: %v", err)
	}
	if !sink.closed || sink.cancelled {
		tb.Fatalf("persist should close the sink (closed %v, cancelled %v)", sink.closed, sink.cancelled)
	}
	return sink.Bytes()
}

func restore(tb failer, data []byte) *fsm.FSM {
	tb.Helper()
	f := fsm.New(zerolog.Nop())
	rc := &closeTracker{Reader: bytes.NewReader(data)}
	if err := f.Restore(rc); err != nil {
		tb.Fatalf("restore: %v", err)
	}
	if !rc.closed {
		tb.Fatalf("restore did not close its reader")
	}
	return f
}

func TestWriteReadSnapshot(t *testing.T) {
	for name, s := range map[string]*fsm.State{"empty": fsm.NewState(), "busy": fuzzBase(t)} {
		var buf bytes.Buffer
		if err := fsm.WriteSnapshot(&buf, s); err != nil {
			t.Fatalf("%s: write: %v", name, err)
		}
		got, err := fsm.ReadSnapshot(&buf)
		if err != nil {
			t.Fatalf("%s: read: %v", name, err)
		}
		if stateJSON(t, got) != stateJSON(t, s) {
			t.Fatalf("%s: round trip differs", name)
		}
		// The restored state works like the original: the same plan, the same results.
		for _, k := range []fsm.Command{&fsm.Join{Ring: ringA, WorkerID: "Z", Incarnation: "z1"}} {
			a, b := s.Clone(), got
			if err1, err2 := a.Apply(k), b.Apply(k); (err1 == nil) != (err2 == nil) || stateJSON(t, a) != stateJSON(t, b) {
				t.Fatalf("%s: restored state behaves differently", name)
			}
		}
	}
}

func TestReadSnapshotRefusesWhatItCannotRead(t *testing.T) {
	for name, in := range map[string]string{
		"garbage":        "not json",
		"empty":          "",
		"newer format":   fmt.Sprintf(`{"format":%d,"state":{}}`, fsm.Version+1),
		"format 0":       `{"format":0,"state":{}}`,
		"no state":       `{"format":1}`,
		"wrong shape":    `{"format":1,"state":{"rings":[1,2]}}`,
		"truncated json": `{"format":1,"state":{"rings":{`,
	} {
		if _, err := fsm.ReadSnapshot(strings.NewReader(in)); err == nil {
			t.Errorf("%s: read without error", name)
		}
	}
	// Missing maps are filled in, so that the state can be applied to at once.
	s, err := fsm.ReadSnapshot(strings.NewReader(`{"format":1,"state":{"rings":{"x":{"key":{"region":"eu","cluster":"c1","service":"orders"}}}}}`))
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	mustApply(t, s, &fsm.RegisterCoordinator{Coordinator: fsm.Coordinator{ID: "c1"}})
	if s.Rings["x"].Members == nil {
		t.Fatalf("members map left nil")
	}
}

// Replaying a generated history through the raft FSM gives the same state as the pure state
// machine; a snapshot taken then, persisted through a sink and restored into a new FSM, gives it too,
// and is not affected by what is applied after it was taken.
func TestFSMReplaySnapshotRestore(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := newWorld(ringA, ringB)
		for range rapid.IntRange(0, 200).Draw(t, "steps") {
			w.step(t)
		}
		f := fsm.New(zerolog.Nop())
		for i, b := range w.log {
			f.Apply(&raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: b})
		}
		want := stateJSON(t, w.st)
		got, applied := fsmJSON(t, f)
		if got != want {
			t.Fatalf("the raft FSM diverged from the pure state after %d entries", len(w.log))
		}
		if applied != uint64(len(w.log)) {
			t.Fatalf("applied index %d, want %d", applied, len(w.log))
		}

		snap, err := f.Snapshot()
		if err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		// Later entries must not leak into a snapshot already taken.
		f.Apply(commandLog(t, uint64(len(w.log)+1), &fsm.Join{Ring: ringA, WorkerID: "late", Incarnation: "l1"}))
		sink := &memSink{}
		if err := snap.Persist(sink); err != nil {
			t.Fatalf("persist: %v", err)
		}
		snap.Release()
		restored, _ := fsmJSON(t, restore(t, sink.Bytes()))
		if restored != want {
			t.Fatalf("restored state differs from the state at snapshot time")
		}
		// A snapshot of the restored FSM persists the same bytes.
		if again := persist(t, restore(t, sink.Bytes())); !bytes.Equal(again, sink.Bytes()) {
			t.Fatalf("snapshot of a restored state differs")
		}
	})
}

// A malformed entry of a known type is refused, as every node of this version refuses it: Apply
// returns the error, the state is unchanged and the node keeps applying.
func TestFSMRefusesMalformedEntriesAndGoesOn(t *testing.T) {
	f := fsm.New(zerolog.Nop())
	if resp := f.Apply(commandLog(t, 1, &fsm.Join{Ring: ringA, WorkerID: "A", Incarnation: "a1"})); resp != nil {
		t.Fatalf("join: %v", resp)
	}
	<-f.Changed()
	before, _ := fsmJSON(t, f)

	entries := map[string][]byte{
		"corrupt": {byte(fsm.TypeJoin), bodyVersion, '{'},
		"empty":   nil,
	}
	index := uint64(1)
	for name, data := range entries {
		index++
		resp := f.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data})
		err, ok := resp.(error)
		if !ok || !errors.Is(err, fsm.ErrMalformed) {
			t.Fatalf("%s: response %v, want ErrMalformed", name, resp)
		}
		if got, applied := fsmJSON(t, f); got != before || applied != index {
			t.Fatalf("%s: state changed or applied index %d not %d", name, applied, index)
		}
	}
	// Entries that are not commands are not for the FSM.
	for _, typ := range []raft.LogType{raft.LogNoop, raft.LogBarrier, raft.LogConfiguration} {
		if resp := f.Apply(&raft.Log{Index: index + 1, Type: typ, Data: []byte("x")}); resp != nil {
			t.Fatalf("log type %v: %v", typ, resp)
		}
	}
	// A refused command is answered with its error, and the node goes on.
	index++
	resp := f.Apply(commandLog(t, index, &fsm.Release{Ring: ringA, WorkerID: "A", Incarnation: "a1", Epoch: 5}))
	if err, ok := resp.(error); !ok || !errors.Is(err, fsm.ErrBadEpoch) {
		t.Fatalf("refused release: %v", resp)
	}
	index++
	if resp := f.Apply(commandLog(t, index, &fsm.Join{Ring: ringA, WorkerID: "B", Incarnation: "b1"})); resp != nil {
		t.Fatalf("the node stopped applying after a refused entry: %v", resp)
	}
	f.View(func(s *fsm.State, applied uint64) {
		if member(s, ringA, "B", "b1") == nil || applied != index {
			t.Fatalf("join after refused entries not applied (applied index %d)", applied)
		}
	})
	select {
	case <-f.Changed():
	default:
		t.Fatalf("no change signal after applying")
	}
	if err := f.Halted(); err != nil {
		t.Fatalf("halted after malformed entries: %v", err)
	}
}

// An entry of a type or body version the node's FSM version does not know halts it: nothing
// after it is applied (skipping it would leave this node with another state than its peers), no
// snapshot is taken, and Halted says why, until a snapshot of a node that knew the entry is
// restored.
func TestFSMHaltsAtAnEntryItDoesNotKnow(t *testing.T) {
	join, _ := fsm.Encode(&fsm.Join{Ring: ringA, WorkerID: "B", Incarnation: "b1"})
	pause, _ := fsm.Encode(&fsm.Pause{Ring: ringA, Reason: "deploy"})
	pass, _ := fsm.Encode(&fsm.Reconcile{Ring: ringA, Joins: []fsm.MemberRef{{WorkerID: "B", Incarnation: "b1"}}})
	joinB, _ := fsm.NewInTerm(1, &fsm.Join{Ring: ringA, WorkerID: "B", Incarnation: "b1"})
	inTerm, _ := fsm.Encode(joinB)
	inTermOfUnknown, _ := fsm.Encode(&fsm.InTerm{Term: 1, Entry: []byte{200, bodyVersion, '{', '}'}})
	for name, tc := range map[string]struct {
		version int
		entry   []byte
	}{
		"old node meets a pause":    {1, pause},
		"v2 node meets a reconcile": {2, pass},
		"unknown type":              {fsm.Version, []byte{200, bodyVersion, '{', '}'}},
		"newer body of join":        {fsm.Version, append([]byte{join[0], bodyVersion + 1}, join[2:]...)},
		"old node, newer version":   {1, append([]byte{join[0], bodyVersion + 1}, join[2:]...)},
		"v4 node meets an in_term":  {4, inTerm},
		"in_term of an unknown":     {fsm.Version, inTermOfUnknown},
	} {
		t.Run(name, func(t *testing.T) {
			f := fsm.NewAt(zerolog.Nop(), tc.version)
			f.Apply(commandLog(t, 1, &fsm.Join{Ring: ringA, WorkerID: "A", Incarnation: "a1"}))
			before, _ := fsmJSON(t, f)
			resp := f.Apply(&raft.Log{Index: 2, Term: 1, Type: raft.LogCommand, Data: tc.entry})
			if err, ok := resp.(error); !ok || !errors.Is(err, fsm.ErrUnknownCommand) {
				t.Fatalf("response %v, want ErrUnknownCommand", resp)
			}
			if err := f.Halted(); !errors.Is(err, fsm.ErrUnknownCommand) || !strings.Contains(err.Error(), "entry 2") {
				t.Fatalf("Halted() = %v, want the unknown entry 2", err)
			}
			resp = f.Apply(commandLog(t, 3, &fsm.Join{Ring: ringA, WorkerID: "B", Incarnation: "b1"}))
			if err, ok := resp.(error); !ok || !errors.Is(err, fsm.ErrHalted) {
				t.Fatalf("entry after the unknown one: response %v, want ErrHalted", resp)
			}
			if got, applied := fsmJSON(t, f); got != before || applied != 1 {
				t.Fatalf("a halted FSM applied something (applied index %d)", applied)
			}
			if _, err := f.Snapshot(); !errors.Is(err, fsm.ErrHalted) {
				t.Fatalf("snapshot of a halted FSM: %v, want ErrHalted", err)
			}
			// A snapshot it can read, taken by a node that applied everything, ends the halt.
			peer := fsm.New(zerolog.Nop())
			peer.Apply(commandLog(t, 1, &fsm.Join{Ring: ringA, WorkerID: "A", Incarnation: "a1"}))
			peer.Apply(commandLog(t, 2, &fsm.Join{Ring: ringA, WorkerID: "B", Incarnation: "b1"}))
			if err := f.Restore(io.NopCloser(bytes.NewReader(persist(t, peer)))); err != nil {
				t.Fatalf("restore: %v", err)
			}
			if err := f.Halted(); err != nil {
				t.Fatalf("still halted after a restore: %v", err)
			}
			if resp := f.Apply(commandLog(t, 4, &fsm.Join{Ring: ringA, WorkerID: "C", Incarnation: "c1"})); resp != nil {
				t.Fatalf("apply after the restore: %v", resp)
			}
		})
	}
}

// A snapshot is written in the oldest format that holds its state: format 1 while the state has
// nothing version 1 does not know (a node of version 1 restores it during a rolling upgrade),
// format 2 once it has a lease timing or controls, which a version 1 node refuses rather than
// dropping them.
func TestSnapshotFormatFollowsTheState(t *testing.T) {
	plain := fuzzBase(t)
	timed := plain.Clone()
	mustApply(t, timed, &fsm.CommitTiming{Timing: timing10s})
	paused := plain.Clone()
	mustApply(t, paused, &fsm.Pause{Ring: ringB, Impl: []string{"payment"}})
	for name, tc := range map[string]struct {
		s      *fsm.State
		format int
	}{"lease state only": {plain, 1}, "with a timing": {timed, 2}, "with controls": {paused, 2}} {
		var buf bytes.Buffer
		if err := fsm.WriteSnapshot(&buf, tc.s); err != nil {
			t.Fatal(err)
		}
		var head struct{ Format int }
		if err := json.Unmarshal(buf.Bytes(), &head); err != nil || head.Format != tc.format {
			t.Fatalf("%s: format %d (%v), want %d", name, head.Format, err, tc.format)
		}
		old := fsm.NewAt(zerolog.Nop(), 1)
		err := old.Restore(io.NopCloser(bytes.NewReader(buf.Bytes())))
		if (err == nil) != (tc.format == 1) {
			t.Fatalf("%s: a version 1 node's restore: %v", name, err)
		}
		if err := fsm.New(zerolog.Nop()).Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
			t.Fatalf("%s: restore: %v", name, err)
		}
	}
}

func TestPersistCancelsOnWriteError(t *testing.T) {
	f := fsm.New(zerolog.Nop())
	f.Apply(commandLog(t, 1, &fsm.Join{Ring: ringA, WorkerID: "A", Incarnation: "a1"}))
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	sink := &memSink{writeErr: errors.New("disk full")}
	if err := snap.Persist(sink); err == nil {
		t.Fatalf("persist succeeded on a failing sink")
	}
	if !sink.cancelled || sink.closed {
		t.Fatalf("a failed persist should cancel, not close (cancelled %v, closed %v)", sink.cancelled, sink.closed)
	}
}

func TestRestoreOfGarbageKeepsTheState(t *testing.T) {
	f := fsm.New(zerolog.Nop())
	f.Apply(commandLog(t, 1, &fsm.Join{Ring: ringA, WorkerID: "A", Incarnation: "a1"}))
	before, _ := fsmJSON(t, f)
	rc := &closeTracker{Reader: strings.NewReader(`{"format":1,"state":`)}
	if err := f.Restore(rc); err == nil {
		t.Fatalf("restore of a truncated snapshot succeeded")
	}
	if !rc.closed {
		t.Fatalf("restore did not close its reader")
	}
	if after, _ := fsmJSON(t, f); after != before {
		t.Fatalf("a failed restore changed the state")
	}
}

// Apply, View, Snapshot and Persist from several goroutines, for the race detector.
func TestFSMConcurrentUse(t *testing.T) {
	f := fsm.New(zerolog.Nop())
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		for i := range 200 {
			c := fsm.Command(&fsm.Join{Ring: ringA, WorkerID: "w", Incarnation: string(rune('a' + i%26))})
			if i%3 == 0 {
				var plan *fsm.Assign
				f.View(func(s *fsm.State, _ uint64) { plan = fsm.Plan(s.Ring(ringA)) })
				if plan == nil {
					continue
				}
				c = plan
			}
			f.Apply(commandLog(t, uint64(i+1), c))
		}
	}()
	go func() {
		defer wg.Done()
		for range 50 {
			snap, err := f.Snapshot()
			if err != nil {
				t.Errorf("snapshot: %v", err)
				return
			}
			if err := snap.Persist(&memSink{}); err != nil {
				t.Errorf("persist: %v", err)
			}
			snap.Release()
		}
	}()
	go func() {
		defer wg.Done()
		for range 200 {
			f.View(func(s *fsm.State, _ uint64) {
				if err := checkStateSafety(s); err != nil {
					t.Errorf("%v", err)
				}
			})
			select {
			case <-f.Changed():
			default:
			}
		}
	}()
	wg.Wait()
}

// Observe sees the state after every entry that changed it, one call per entry, and after a
// restore: a member that one entry adds and the next forgets is seen, where the coalesced Changed
// signal may show neither. A refused entry changes nothing and is not shown.
func TestObserveSeesEveryEntry(t *testing.T) {
	f := fsm.New(zerolog.Nop())
	var seen []string
	var types []string
	f.Observe(func(s *fsm.State, c fsm.Command) {
		types = append(types, c.Type().String())
		r := s.Ring(ringA)
		var keys []string
		if r != nil {
			for _, m := range r.SortedMembers() {
				keys = append(keys, m.WorkerID+"/"+m.Incarnation)
			}
		}
		seen = append(seen, strings.Join(keys, ","))
	})
	entries := []fsm.Command{
		&fsm.Join{Ring: ringA, WorkerID: "a", Incarnation: "old"},
		&fsm.Join{Ring: ringA, WorkerID: "b", Incarnation: "x"},
		&fsm.Release{Ring: ringA, WorkerID: "nobody", Incarnation: "n", Epoch: 1}, // refused
		&fsm.Down{Ring: ringA, WorkerID: "b", Incarnation: "x"},                   // b holds nothing: forgotten
	}
	for i, c := range entries {
		f.Apply(commandLog(t, uint64(i+1), c))
	}
	want := []string{"a/old", "a/old,b/x", "a/old"}
	if strings.Join(seen, " | ") != strings.Join(want, " | ") {
		t.Fatalf("observed %q, want %q", seen, want)
	}
	if got := strings.Join(types, ","); got != "join,join,down" {
		t.Fatalf("observed commands %s, want join,join,down", got)
	}
	seen = nil
	g := fsm.New(zerolog.Nop())
	g.Observe(func(s *fsm.State, c fsm.Command) {
		if c != nil {
			t.Errorf("a restore was observed with command %v", c)
		}
		seen = append(seen, fmt.Sprint(len(s.Ring(ringA).Members)))
	})
	if err := g.Restore(io.NopCloser(bytes.NewReader(persist(t, f)))); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0] != "1" {
		t.Fatalf("a restore was observed as %q, want one state of 1 member", seen)
	}
}
