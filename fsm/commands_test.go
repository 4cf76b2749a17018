package fsm_test

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// oneOfEach returns a command of every type with every field set.
func oneOfEach() []fsm.Command {
	ranges := lease.Ranges{{Start: lease.MinToken, End: -1}, {Start: 10, End: lease.MaxToken}}
	return []fsm.Command{
		&fsm.RegisterCoordinator{Coordinator: fsm.Coordinator{ID: "c1", RaftAddr: "127.0.0.1:7001", RSocketAddr: "127.0.0.1:7101", HTTPAddr: "127.0.0.1:7201"}},
		&fsm.RemoveCoordinator{ID: "c1"},
		&fsm.Join{Ring: ringA, WorkerID: "w1", Incarnation: "i1"},
		&fsm.Down{Ring: ringA, WorkerID: "w1", Incarnation: "i1"},
		&fsm.Leave{Ring: ringA, WorkerID: "w1", Incarnation: "i1"},
		&fsm.Release{Ring: ringA, WorkerID: "w1", Incarnation: "i1", Epoch: 1<<63 + 7},
		&fsm.Expire{Ring: ringA, WorkerID: "w1", Incarnation: "i1", UpTo: 42, Generation: 9},
		&fsm.Assign{Ring: ringB, Assignments: []fsm.Assignment{
			{WorkerID: "w1", Incarnation: "i1", Epoch: 3, NodeIndex: 0, NodeCount: 2, Ranges: ranges},
			{WorkerID: "w2", Incarnation: "i9", Epoch: 4, NodeIndex: 1, NodeCount: 2, Ranges: lease.Ranges{{Start: 0, End: 9}}},
		}},
		&fsm.CommitTiming{Timing: timing10s},
		&fsm.RetireTiming{Retire: timing10s, Keep: timing3s},
		&fsm.Pause{Ring: ringA, Impl: []string{"payment"}, Reason: "deploy", AtMs: 1700000000000},
		&fsm.Resume{Ring: ringA, Impl: []string{"payment"}, AtMs: 1700000000001},
		&fsm.Limit{Ring: ringA, PerSecond: 12.5, AtMs: 1700000000002},
		&fsm.Reconcile{Ring: ringA,
			Releases:    []fsm.ReleaseRef{{WorkerID: "w1", Incarnation: "i1", Epoch: 5}},
			Joins:       []fsm.MemberRef{{WorkerID: "w2", Incarnation: "i2"}},
			Downs:       []fsm.MemberRef{{WorkerID: "w3", Incarnation: "i3"}},
			Expires:     []fsm.ExpireRef{{WorkerID: "w4", Incarnation: "i4", UpTo: 4, Generation: 8}},
			Assignments: []fsm.Assignment{{WorkerID: "w1", Incarnation: "i1", Epoch: 6, NodeIndex: 1, NodeCount: 2, Ranges: ranges}},
		},
		&fsm.Cordon{Ring: ringA, WorkerID: "w1", Clear: true},
		&fsm.EpochFloor{Floor: 1_796_000_000_000_000, Settle: true, Reason: "recover", AtMs: 1796000000000},
		&fsm.InTerm{Term: 7, Entry: []byte{byte(fsm.TypeRemoveCoordinator), bodyVersion, '{', '}'}},
		&fsm.SetMovement{Ring: ringA, Mode: fsm.ModeMinimal, Tolerance: 0.2, MaxRanges: 9, AtMs: 1796000000001},
		&fsm.HandOn{Ring: ringA, WorkerID: "w1", Generation: 12},
		&fsm.EvenOut{Ring: ringA, Generation: 12, Step: 3},
	}
}

// bodyVersion is the body version every command type of this build is written with.
const bodyVersion = 1

func TestEncodeDecodeRoundTrip(t *testing.T) {
	seen := map[fsm.CommandType]bool{}
	for _, c := range oneOfEach() {
		b, err := fsm.Encode(c)
		if err != nil {
			t.Fatalf("encode %T: %v", c, err)
		}
		if fsm.CommandType(b[0]) != c.Type() || b[1] != bodyVersion {
			t.Fatalf("%T: header %v, want type %d version %d", c, b[:2], c.Type(), bodyVersion)
		}
		got, err := fsm.Decode(b)
		if err != nil {
			t.Fatalf("decode %T: %v", c, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("round trip of %T:\n got %+v\nwant %+v", c, got, c)
		}
		seen[c.Type()] = true
		// A value (not a pointer) encodes the same.
		v, err := fsm.Encode(reflect.ValueOf(c).Elem().Interface().(fsm.Command))
		if err != nil || !bytes.Equal(v, b) {
			t.Fatalf("%T by value encodes as %q (%v), by pointer as %q", c, v, err, b)
		}
	}
	for typ := fsm.TypeRegisterCoordinator; typ <= lastType; typ++ {
		if !seen[typ] && typ.Since() != 0 { // 15 (Cordon) comes with the ctl work of issue 10
			t.Fatalf("command type %d is not covered by the round trip", typ)
		}
	}
}

// TestCommandTypeNames: every type has a name of its own, the one logs print, and a type this node
// does not know says so with its number.
func TestCommandTypeNames(t *testing.T) {
	want := map[fsm.CommandType]string{
		fsm.TypeRegisterCoordinator: "register_coordinator", fsm.TypeRemoveCoordinator: "remove_coordinator",
		fsm.TypeJoin: "join", fsm.TypeDown: "down", fsm.TypeLeave: "leave", fsm.TypeRelease: "release",
		fsm.TypeExpire: "expire", fsm.TypeAssign: "assign", fsm.TypeCommitTiming: "commit_timing",
		fsm.TypeRetireTiming: "retire_timing", fsm.TypePause: "pause", fsm.TypeResume: "resume", fsm.TypeLimit: "limit",
		fsm.TypeReconcile: "reconcile", fsm.TypeCordon: "cordon", fsm.TypeEpochFloor: "epoch_floor",
		fsm.TypeInTerm: "in_term", fsm.TypeSetMovement: "set_movement", fsm.TypeHandOn: "hand_on", fsm.TypeEvenOut: "even_out",
	}
	for _, c := range oneOfEach() {
		if got := c.Type().String(); got != want[c.Type()] {
			t.Errorf("%T: name %q, want %q", c, got, want[c.Type()])
		}
	}
	if got := fsm.CommandType(200).String(); got != "unknown(200)" {
		t.Errorf("type 200: name %q, want unknown(200)", got)
	}
}

// lastType is the highest command type of this build.
const lastType = fsm.TypeEvenOut

// TestCommandsSince: the lease commands are FSM version 1, the lease timing and the flow controls
// version 2, Reconcile version 3, Cordon and the epoch floor version 4, InTerm version 5,
// SetMovement, HandOn and EvenOut version 6 (the version of this build), and a type the build does not know was
// introduced by no version it knows.
func TestCommandsSince(t *testing.T) {
	if fsm.Version != 6 {
		t.Fatalf("FSM version %d, want 6", fsm.Version)
	}
	for typ := fsm.TypeRegisterCoordinator; typ <= lastType; typ++ {
		want := 1
		switch {
		case typ >= fsm.TypeSetMovement:
			want = 6
		case typ == fsm.TypeInTerm:
			want = 5
		case typ > fsm.TypeReconcile:
			want = 4
		case typ == fsm.TypeReconcile:
			want = 3
		case typ > fsm.TypeAssign:
			want = 2
		}
		if got := typ.Since(); got != want {
			t.Errorf("%s: since %d, want %d", typ, got, want)
		}
	}
	if got := fsm.CommandType(200).Since(); got != 0 {
		t.Errorf("unknown type: since %d, want 0", got)
	}
}

func TestDecodeUnknownCommand(t *testing.T) {
	join, _ := fsm.Encode(&fsm.Join{Ring: ringA, WorkerID: "w", Incarnation: "i"})
	cases := map[string][]byte{
		"type 0":                  {0, bodyVersion, '{', '}'},
		"type after the last":     {byte(lastType) + 1, bodyVersion, '{', '}'},
		"type 255":                {255, bodyVersion, '{', '}'},
		"newer version":           append([]byte{byte(fsm.TypeJoin), bodyVersion + 1}, join[2:]...),
		"newer version, new body": {byte(fsm.TypeAssign), bodyVersion + 1, 0xff, 0x00},
		"unknown type, no body":   {200, bodyVersion},
	}
	for name, b := range cases {
		if _, err := fsm.Decode(b); !errors.Is(err, fsm.ErrUnknownCommand) {
			t.Errorf("%s: %v, want ErrUnknownCommand", name, err)
		}
	}
}

func TestDecodeMalformed(t *testing.T) {
	cases := map[string][]byte{
		"nil":                         nil,
		"one byte":                    {byte(fsm.TypeJoin)},
		"no body":                     {byte(fsm.TypeJoin), bodyVersion},
		"garbage":                     append([]byte{byte(fsm.TypeRelease), bodyVersion}, "\x00\x01garbage"...),
		"wrong shape":                 append([]byte{byte(fsm.TypeAssign), bodyVersion}, `{"assignments":{"a":1}}`...),
		"wrong type":                  append([]byte{byte(fsm.TypeRelease), bodyVersion}, `{"epoch":"7"}`...),
		"negative":                    append([]byte{byte(fsm.TypeExpire), bodyVersion}, `{"up_to":-1}`...),
		"token too big":               append([]byte{byte(fsm.TypeAssign), bodyVersion}, `{"assignments":[{"ranges":[{"Start":9223372036854775808,"End":0}]}]}`...),
		"reconcile, joins not a list": append([]byte{byte(fsm.TypeReconcile), bodyVersion}, `{"ring":{},"joins":{"w":"i"}}`...),
		"reconcile, epoch a string":   append([]byte{byte(fsm.TypeReconcile), bodyVersion}, `{"releases":[{"epoch":"1"}]}`...),
	}
	for name, b := range cases {
		if _, err := fsm.Decode(b); !errors.Is(err, fsm.ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	// Every truncation of a valid entry is refused, never decoded into a different command.
	for _, c := range oneOfEach() {
		b, _ := fsm.Encode(c)
		for n := range len(b) {
			if _, err := fsm.Decode(b[:n]); !errors.Is(err, fsm.ErrMalformed) {
				t.Fatalf("%T truncated to %d of %d bytes: %v, want ErrMalformed", c, n, len(b), err)
			}
		}
	}
}

// fuzzBase is a state with a bit of everything: a settled member, a shrinking one with a hold, a
// departed Node-0 candidate, a superseded incarnation, an unassigned member and a coordinator.
func fuzzBase(tb failer) *fsm.State {
	tb.Helper()
	s := fsm.NewState()
	mustApply(tb, s, &fsm.RegisterCoordinator{Coordinator: fsm.Coordinator{ID: "c1", RaftAddr: "127.0.0.1:7001"}})
	for _, id := range []string{"A", "B", "C"} {
		mustApply(tb, s, &fsm.Join{Ring: ringA, WorkerID: id, Incarnation: id + "1"})
	}
	planAndAssign(tb, s, ringA)
	mustApply(tb, s, &fsm.Join{Ring: ringA, WorkerID: "D", Incarnation: "D1"})
	planAndAssign(tb, s, ringA) // A, B, C shrink and hold the rest
	mustApply(tb, s, &fsm.Release{Ring: ringA, WorkerID: "C", Incarnation: "C1", Epoch: mustMember(tb, s, ringA, "C", "C1").Epoch})
	mustApply(tb, s, &fsm.Join{Ring: ringA, WorkerID: "B", Incarnation: "B2"})
	mustApply(tb, s, &fsm.Down{Ring: ringA, WorkerID: "A", Incarnation: "A1"})
	mustApply(tb, s, &fsm.Join{Ring: ringA, WorkerID: "E", Incarnation: "E1"})
	mustApply(tb, s, &fsm.Join{Ring: ringB, WorkerID: "A", Incarnation: "A1"})
	planAndAssign(tb, s, ringB)
	if err := checkStateSafety(s); err != nil {
		tb.Fatalf("fuzz base: %v", err)
	}
	return s
}

// fuzzSeeds are entries that exercise every command type against fuzzBase, plus damaged ones.
func fuzzSeeds(tb failer, base *fsm.State) [][]byte {
	tb.Helper()
	r := base.Ring(ringA)
	next := r.LastEpoch + 1
	cmds := oneOfEach()
	for _, m := range r.SortedMembers() {
		cmds = append(cmds,
			&fsm.Join{Ring: ringA, WorkerID: m.WorkerID, Incarnation: m.Incarnation},
			&fsm.Join{Ring: ringA, WorkerID: m.WorkerID, Incarnation: m.Incarnation + "x"},
			&fsm.Down{Ring: ringA, WorkerID: m.WorkerID, Incarnation: m.Incarnation},
			&fsm.Leave{Ring: ringA, WorkerID: m.WorkerID, Incarnation: m.Incarnation},
			&fsm.Release{Ring: ringA, WorkerID: m.WorkerID, Incarnation: m.Incarnation, Epoch: m.Epoch},
			&fsm.Release{Ring: ringA, WorkerID: m.WorkerID, Incarnation: m.Incarnation, Epoch: m.Epoch + 1},
			&fsm.Expire{Ring: ringA, WorkerID: m.WorkerID, Incarnation: m.Incarnation, UpTo: m.Epoch, Generation: r.Generation},
			&fsm.Expire{Ring: ringA, WorkerID: m.WorkerID, Incarnation: m.Incarnation, UpTo: m.Epoch},
			&fsm.Assign{Ring: ringA, Assignments: []fsm.Assignment{{WorkerID: m.WorkerID, Incarnation: m.Incarnation, Epoch: next, NodeIndex: 0, NodeCount: 1, Ranges: lease.Ranges{lease.FullRing}}}},
			&fsm.Assign{Ring: ringA, Assignments: []fsm.Assignment{{WorkerID: m.WorkerID, Incarnation: m.Incarnation, Epoch: next, NodeIndex: 3, NodeCount: 4, Ranges: lease.Ranges{{Start: 5, End: -5}}}}},
			&fsm.Cordon{Ring: ringA, WorkerID: m.WorkerID},
		)
	}
	for _, h := range fsm.PendingHolds(r) {
		cmds = append(cmds, &fsm.Expire{Ring: ringA, WorkerID: h.WorkerID, Incarnation: h.Incarnation, UpTo: h.Epoch, Generation: r.Generation})
	}
	if plan := fsm.Plan(r); plan != nil {
		cmds = append(cmds, plan)
	}
	cmds = append(cmds, fuzzPasses(tb, base)...)
	var out [][]byte
	for _, c := range cmds {
		b, err := fsm.Encode(c)
		if err != nil {
			tb.Fatalf("encode seed: %v", err)
		}
		out = append(out, b, b[:len(b)/2])
	}
	return append(out, nil, []byte{0}, []byte{byte(fsm.TypeAssign), bodyVersion, 'n', 'u', 'l', 'l'},
		[]byte{byte(fsm.TypeJoin), bodyVersion + 1, '{', '}'}, []byte{77, bodyVersion, '{', '}'})
}

// FuzzDecodeApply decodes arbitrary bytes and applies them to a state that has a bit of everything.
// Nothing may panic; a decode error is ErrMalformed or ErrUnknownCommand; a refused command changes
// nothing; an accepted one keeps every ring safe; and applying it again changes nothing more.
func FuzzDecodeApply(f *testing.F) {
	base := fuzzBase(f)
	for _, seed := range fuzzSeeds(f, base) {
		f.Add(seed)
	}
	baseJSON := stateJSON(f, base)
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := fsm.Decode(data)
		if err != nil {
			if !errors.Is(err, fsm.ErrMalformed) && !errors.Is(err, fsm.ErrUnknownCommand) {
				t.Fatalf("decode error outside the catalog: %v", err)
			}
			return
		}
		enc, err := fsm.Encode(c)
		if err != nil {
			t.Fatalf("a decoded %T does not encode: %v", c, err)
		}
		again, err := fsm.Decode(enc)
		if err != nil {
			t.Fatalf("a re-encoded %T does not decode: %v", c, err)
		}
		if enc2, _ := fsm.Encode(again); !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable: %q then %q", enc, enc2)
		}

		s := base.Clone()
		if err := s.Apply(c); err != nil {
			if got := stateJSON(t, s); got != baseJSON {
				t.Fatalf("refused %T (%v) changed the state", c, err)
			}
			return
		}
		if err := checkStateSafety(s); err != nil {
			t.Fatalf("after %T %+v: %v", c, c, err)
		}
		once := stateJSON(t, s)
		_ = s.Apply(c)
		if stateJSON(t, s) != once {
			t.Fatalf("%T %+v is not idempotent", c, c)
		}
	})
}
