package fsm_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease/minimal"
)

// TestSetMovementRefusals: a mode other than the two, parameters with the contiguous mode and
// parameters lease/minimal refuses are malformed, each with a message that says what is wrong.
func TestSetMovementRefusals(t *testing.T) {
	for _, tc := range []struct {
		c    fsm.SetMovement
		want string
	}{
		{fsm.SetMovement{Ring: ringA, Mode: "even"}, `fsm: malformed command: movement mode "even": want contiguous or minimal`},
		{fsm.SetMovement{Ring: ringA}, `fsm: malformed command: movement mode "": want contiguous or minimal`},
		{fsm.SetMovement{Ring: ringA, Mode: fsm.ModeContiguous, Tolerance: 0.1}, "fsm: malformed command: tolerance, max ranges, return delay, idle and step moves are parameters of the minimal mode only"},
		{fsm.SetMovement{Ring: ringA, Mode: fsm.ModeContiguous, MaxRanges: 8}, "fsm: malformed command: tolerance, max ranges, return delay, idle and step moves are parameters of the minimal mode only"},
		{fsm.SetMovement{Ring: ringA, Mode: fsm.ModeContiguous, IdleMs: 5000}, "fsm: malformed command: tolerance, max ranges, return delay, idle and step moves are parameters of the minimal mode only"},
		{fsm.SetMovement{Ring: ringA, Mode: fsm.ModeMinimal, ReturnDelayMs: 999}, "fsm: malformed command: return delay 999ms is not in [1s, 10m0s]"},
		{fsm.SetMovement{Ring: ringA, Mode: fsm.ModeMinimal, ReturnDelayMs: -5}, "fsm: malformed command: return delay -5ms is not in [1s, 10m0s]"},
		{fsm.SetMovement{Ring: ringA, Mode: fsm.ModeMinimal, IdleMs: 3_600_001}, "fsm: malformed command: idle 1h0m0.001s is not in [1s, 1h0m0s]"},
		{fsm.SetMovement{Ring: ringA, Mode: fsm.ModeMinimal, StepMoves: -1}, "fsm: malformed command: step moves -1 is not in [1, 1024]"},
		{fsm.SetMovement{Ring: ringA, Mode: fsm.ModeMinimal, StepMoves: 1025}, "fsm: malformed command: step moves 1025 is not in [1, 1024]"},
		{fsm.SetMovement{Ring: ringA, Mode: fsm.ModeMinimal, Tolerance: 0.7}, "fsm: malformed command: minimal: bad config: tolerance 0.7 is not in (0, 0.5]"},
		{fsm.SetMovement{Ring: ringA, Mode: fsm.ModeMinimal, Tolerance: math.NaN()}, "fsm: malformed command: minimal: bad config: tolerance NaN is not in (0, 0.5]"},
		{fsm.SetMovement{Ring: ringA, Mode: fsm.ModeMinimal, MaxRanges: 8}, "fsm: malformed command: minimal: bad config: max ranges 8 is below ⌈1/τ⌉+2 = 12, the pieces a join may take"},
	} {
		err := fsm.NewState().Apply(&tc.c)
		if !errors.Is(err, fsm.ErrMalformed) || err.Error() != tc.want {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
	}
	if err := fsm.NewState().Apply(&fsm.SetMovement{Mode: fsm.ModeMinimal}); !errors.Is(err, fsm.ErrMalformed) {
		t.Errorf("a setting of no ring: %v, want ErrMalformed", err)
	}
	if err := fsm.NewState().Apply(&fsm.SetMovement{Ring: ringA, Mode: fsm.ModeMinimal, Tolerance: 0.5, MaxRanges: -1}); !errors.Is(err, minimal.ErrConfig) {
		t.Errorf("negative max ranges: %v, want minimal.ErrConfig", err)
	}
}

// TestSetMovementIsAReplicatedSetting: the minimal mode is stored with its defaults filled in
// (a later build's defaults do not change a ring's plans), setting it again changes nothing (not
// even SinceMs), new parameters replace the old, and the contiguous mode removes the setting; a
// ring that only the setting created is forgotten with it.
func TestSetMovementIsAReplicatedSetting(t *testing.T) {
	s := fsm.NewState()
	mustApply(t, s, &fsm.SetMovement{Ring: ringA, Mode: fsm.ModeMinimal, AtMs: 100})
	r := s.Ring(ringA)
	if r == nil || r.Mode() != fsm.ModeMinimal {
		t.Fatalf("ring after setting the minimal mode: %+v", r)
	}
	want := fsm.Movement{Tolerance: minimal.DefaultTolerance, MaxRanges: minimal.DefaultMaxRanges, StepMoves: minimal.DefaultStepMoves,
		IdleMs: minimal.DefaultIdle.Milliseconds(), ReturnDelayMs: minimal.DefaultReturnDelay.Milliseconds(), SinceMs: 100}
	if !reflect.DeepEqual(*r.Movement, want) {
		t.Fatalf("setting %+v, want %+v", *r.Movement, want)
	}
	before := stateJSON(t, s)
	mustApply(t, s, &fsm.SetMovement{Ring: ringA, Mode: fsm.ModeMinimal, Tolerance: minimal.DefaultTolerance, AtMs: 200})
	if stateJSON(t, s) != before {
		t.Fatalf("setting the mode in force again changed the state")
	}
	mustApply(t, s, &fsm.SetMovement{Ring: ringA, Mode: fsm.ModeMinimal, Tolerance: 0.2, MaxRanges: 8, AtMs: 300})
	if got := *s.Ring(ringA).Movement; !reflect.DeepEqual(got, fsm.Movement{Tolerance: 0.2, MaxRanges: 8, StepMoves: minimal.DefaultStepMoves,
		IdleMs: minimal.DefaultIdle.Milliseconds(), ReturnDelayMs: minimal.DefaultReturnDelay.Milliseconds(), SinceMs: 300}) {
		t.Fatalf("setting after new parameters: %+v", got)
	}
	// The timing parameters are part of the setting: every leader waits and spends the same.
	mustApply(t, s, &fsm.SetMovement{Ring: ringA, Mode: fsm.ModeMinimal, Tolerance: 0.2, MaxRanges: 8,
		ReturnDelayMs: 30_000, IdleMs: 60_000, StepMoves: 2, AtMs: 400})
	if got := s.Ring(ringA).Movement.Config(); got.ReturnDelay != 30*time.Second || got.Idle != time.Minute || got.StepMoves != 2 || s.Ring(ringA).Movement.SinceMs != 400 {
		t.Fatalf("timing of the setting: %+v (since %d)", got, s.Ring(ringA).Movement.SinceMs)
	}
	mustApply(t, s, &fsm.SetMovement{Ring: ringA, Mode: fsm.ModeMinimal, Tolerance: 0.2, MaxRanges: 8, AtMs: 500})
	if got := s.Ring(ringA).Movement.Config(); got.ReturnDelay != minimal.DefaultReturnDelay || got.Idle != minimal.DefaultIdle || got.StepMoves != minimal.DefaultStepMoves {
		t.Fatalf("a setting without timing did not go back to the defaults: %+v", got)
	}
	if got := s.Ring(ringA).Movement.Config(); got.Tolerance != 0.2 || got.MaxRanges != 8 || got.MergeAbove != 4 {
		t.Fatalf("config of the setting: %+v", got)
	}
	mustApply(t, s, &fsm.SetMovement{Ring: ringA, Mode: fsm.ModeContiguous})
	if s.Ring(ringA) != nil {
		t.Fatalf("a ring only the setting made outlived it: %+v", s.Ring(ringA))
	}
	mustApply(t, s, &fsm.SetMovement{Ring: ringB, Mode: fsm.ModeContiguous})
	if len(s.Rings) != 0 {
		t.Fatalf("the contiguous mode of an unknown ring made a ring")
	}

	// A ring with members keeps them; the default mode is contiguous.
	p := settledPair(t)
	if p.Ring(ringA).Mode() != fsm.ModeContiguous {
		t.Fatalf("default mode %q", p.Ring(ringA).Mode())
	}
	mustApply(t, p, &fsm.SetMovement{Ring: ringA, Mode: fsm.ModeMinimal})
	mustApply(t, p, &fsm.SetMovement{Ring: ringA, Mode: fsm.ModeContiguous})
	if r := p.Ring(ringA); r == nil || len(r.Members) != 2 || r.Movement != nil {
		t.Fatalf("ring after minimal and back: %s", describeRing(r))
	}
}

// TestMovementCloneAndRoundTrip: Clone copies the setting (a change to the copy leaves the
// original), and the snapshot encoding keeps it.
func TestMovementCloneAndRoundTrip(t *testing.T) {
	s := settledPair(t)
	mustApply(t, s, &fsm.SetMovement{Ring: ringA, Mode: fsm.ModeMinimal, Tolerance: 0.25, MaxRanges: 7, AtMs: 5})
	c := s.Clone()
	if !reflect.DeepEqual(c, s) {
		t.Fatalf("clone differs from the state")
	}
	c.Ring(ringA).Movement.Tolerance = 0.4
	c.Ring(ringA).Movement.Target[0].Ranges[0].End = 7
	if s.Ring(ringA).Movement.Tolerance != 0.25 || s.Ring(ringA).Movement.Target[0].Ranges[0].End == 7 {
		t.Fatalf("a change to the clone's setting changed the original")
	}
	var buf bytes.Buffer
	if err := fsm.WriteSnapshot(&buf, s); err != nil {
		t.Fatal(err)
	}
	got, err := fsm.ReadSnapshot(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip:\n got %s\nwant %s", stateJSON(t, got), stateJSON(t, s))
	}
}

// TestSnapshotWithMovementNeedsVersion6: a snapshot is of format 6 only once a ring is in the
// minimal mode; a version 5 node refuses it rather than dropping the setting (and planning that
// ring contiguously), and restores it again once the ring is back to contiguous.
func TestSnapshotWithMovementNeedsVersion6(t *testing.T) {
	s := settledPair(t)
	mustApply(t, s, &fsm.Cordon{Ring: ringA, WorkerID: "B"})
	format := func(s *fsm.State) int {
		var head struct{ Format int }
		if err := json.Unmarshal([]byte(stateJSON(t, s)), &head); err != nil {
			t.Fatal(err)
		}
		return head.Format
	}
	restoreAt := func(v int, s *fsm.State) error {
		return fsm.NewAt(zerolog.Nop(), v).Restore(io.NopCloser(bytes.NewReader([]byte(stateJSON(t, s)))))
	}
	if f := format(s); f != 4 {
		t.Fatalf("format before the setting: %d, want 4 (the cordon)", f)
	}
	mustApply(t, s, &fsm.SetMovement{Ring: ringB, Mode: fsm.ModeMinimal})
	if f := format(s); f != 6 {
		t.Fatalf("format with a minimal ring: %d, want 6", f)
	}
	if err := restoreAt(5, s); err == nil || err.Error() != "fsm: read snapshot: format 6, this node reads formats 1 to 5" {
		t.Fatalf("a version 5 node's restore of a minimal ring: %v", err)
	}
	if err := restoreAt(6, s); err != nil {
		t.Fatalf("a version 6 node's restore: %v", err)
	}
	mustApply(t, s, &fsm.SetMovement{Ring: ringB, Mode: fsm.ModeContiguous})
	if f := format(s); f != 4 {
		t.Fatalf("format once every ring is contiguous again: %d, want 4", f)
	}
	if err := restoreAt(5, s); err != nil {
		t.Fatalf("a version 5 node's restore once the setting is gone: %v", err)
	}
}

// TestVersion5NodeHaltsAtSetMovement: a version 5 node halts at a SetMovement entry rather than
// skipping it (it would plan the ring contiguously while its peers plan it minimally).
func TestVersion5NodeHaltsAtSetMovement(t *testing.T) {
	f := fsm.NewAt(zerolog.Nop(), 5)
	f.Apply(commandLog(t, 1, &fsm.Join{Ring: ringA, WorkerID: "A", Incarnation: "a1"}))
	resp := f.Apply(commandLog(t, 2, &fsm.SetMovement{Ring: ringA, Mode: fsm.ModeMinimal}))
	if err, _ := resp.(error); !errors.Is(err, fsm.ErrUnknownCommand) {
		t.Fatalf("version 5 node applying a SetMovement: %v, want ErrUnknownCommand", resp)
	}
	if f.Halted() == nil {
		t.Fatalf("version 5 node did not halt at a SetMovement")
	}
	if resp := fsm.New(zerolog.Nop()).Apply(commandLog(t, 1, &fsm.SetMovement{Ring: ringA, Mode: fsm.ModeMinimal})); resp != nil {
		t.Fatalf("version 6 node applying a SetMovement: %v", resp)
	}
}

// TestHandOnOfAnOlderReservationChangesNothing: a HandOn decided before the worker id came back
// and left again (its slot reserved at a later generation) changes nothing, nor does one of a slot
// that is not reserved, or of a contiguous ring; one without a worker id is malformed.
func TestHandOnOfAnOlderReservationChangesNothing(t *testing.T) {
	s := settledPair(t)
	mustApply(t, s, &fsm.SetMovement{Ring: ringA, Mode: fsm.ModeMinimal})
	mustApply(t, s, &fsm.Down{Ring: ringA, WorkerID: "B", Incarnation: "b1"})
	decided := s.Ring(ringA).Generation
	join(t, s, "B", "b2")
	mustApply(t, s, &fsm.Down{Ring: ringA, WorkerID: "B", Incarnation: "b2"})
	before := stateJSON(t, s)
	for _, c := range []*fsm.HandOn{
		{Ring: ringA, WorkerID: "B", Generation: decided},
		{Ring: ringA, WorkerID: "A", Generation: s.Ring(ringA).Generation},
		{Ring: ringB, WorkerID: "A", Generation: 1},
	} {
		mustApply(t, s, c)
		if stateJSON(t, s) != before {
			t.Fatalf("%+v changed the state", c)
		}
	}
	mustApply(t, s, &fsm.HandOn{Ring: ringA, WorkerID: "B", Generation: s.Ring(ringA).Generation})
	if r := s.Ring(ringA); len(r.Reservations()) != 0 || len(r.Movement.Target) != 1 {
		t.Fatalf("B's slot was not handed on: %+v", r.Movement.Target)
	}
	if err := s.Apply(&fsm.HandOn{Ring: ringA}); !errors.Is(err, fsm.ErrMalformed) || err.Error() != "fsm: malformed command: hand-on without a worker id" {
		t.Fatalf("hand-on without a worker id: %v", err)
	}
}

// TestSnapshotWithABadMovementSettingIsRefused: a snapshot whose ring carries a movement setting no
// planner accepts (only a damaged or hand-made file has one) is refused with the reason, rather
// than restored into a state every plan of that ring would fail on.
func TestSnapshotWithABadMovementSettingIsRefused(t *testing.T) {
	s := settledPair(t)
	mustApply(t, s, &fsm.SetMovement{Ring: ringA, Mode: fsm.ModeMinimal})
	text := strings.Replace(stateJSON(t, s), `"tolerance":0.1`, `"tolerance":0.9`, 1)
	_, err := fsm.ReadSnapshot(strings.NewReader(text))
	if !errors.Is(err, minimal.ErrConfig) || !strings.Contains(err.Error(), "movement setting: minimal: bad config: tolerance 0.9 is not in (0, 0.5]") {
		t.Fatalf("read a snapshot with tolerance 0.9: %v", err)
	}
}

// TestMovementWithoutTimingTakesTheDefaults: a setting written before the return delay and the
// idle time were part of it (no idle_ms, no return_delay_ms) plans with the defaults, the same on
// every node.
func TestMovementWithoutTimingTakesTheDefaults(t *testing.T) {
	var m fsm.Movement
	if err := json.Unmarshal([]byte(`{"tolerance":0.1,"max_ranges":16,"step_moves":8,"since_ms":5}`), &m); err != nil {
		t.Fatal(err)
	}
	if got := m.Config(); got.ReturnDelay != minimal.DefaultReturnDelay || got.Idle != minimal.DefaultIdle || got.StepMoves != 8 {
		t.Fatalf("config of a setting without timing: %+v", got)
	}
}
