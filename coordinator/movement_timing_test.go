package coordinator

import (
	"errors"
	"testing"
	"time"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/lease/minimal"
)

// TestMovementCallCarriesTheTiming: a movement call's return delay, idle time and step moves
// reach the command, are committed with the setting and shown by the view (defaults filled in when
// left out); a 0, a value out of bounds or any of them with the contiguous mode is a bad request
// that says which and why.
func TestMovementCallCarriesTheTiming(t *testing.T) {
	c, err := movementCommand(testRing, []byte(`{"mode":"minimal","return_delay_ms":30000,"idle_ms":60000,"step_moves":4}`), 7)
	if err != nil {
		t.Fatal(err)
	}
	s := fsm.NewState()
	apply(t, s, c)
	v := movementView(s.Ring(testRing))
	if v.ReturnDelayMs != 30_000 || v.IdleMs != 60_000 || v.StepMoves != 4 || v.Tolerance != minimal.DefaultTolerance {
		t.Fatalf("view of the setting: %+v", v)
	}
	if got := s.Ring(testRing).Movement.Config(); got.ReturnDelay != 30*time.Second || got.Idle != time.Minute || got.StepMoves != 4 {
		t.Fatalf("committed setting: %+v", got)
	}
	c, err = movementCommand(testRing, []byte(`{"mode":"minimal"}`), 8)
	if err != nil {
		t.Fatal(err)
	}
	apply(t, s, c)
	if v := movementView(s.Ring(testRing)); v.ReturnDelayMs != minimal.DefaultReturnDelay.Milliseconds() ||
		v.IdleMs != minimal.DefaultIdle.Milliseconds() || v.StepMoves != minimal.DefaultStepMoves {
		t.Fatalf("view of the defaults: %+v", v)
	}
	for body, want := range map[string]string{
		`{"mode":"minimal","return_delay_ms":0}`:      "bad_request: return_delay_ms must be from 1000 to 600000, got 0",
		`{"mode":"minimal","return_delay_ms":700000}`: "bad_request: fsm: malformed command: return delay 11m40s is not in [1s, 10m0s]",
		`{"mode":"minimal","idle_ms":0}`:              "bad_request: idle_ms must be from 1000 to 3600000, got 0",
		`{"mode":"minimal","idle_ms":500}`:            "bad_request: fsm: malformed command: idle 500ms is not in [1s, 1h0m0s]",
		`{"mode":"minimal","step_moves":0}`:           "bad_request: step_moves must be from 1 to 1024, got 0",
		`{"mode":"minimal","step_moves":2000}`:        "bad_request: fsm: malformed command: step moves 2000 is not in [1, 1024]",
		`{"mode":"contiguous","idle_ms":5000}`:        "bad_request: tolerance, max_ranges, return_delay_ms, idle_ms and step_moves are parameters of the minimal mode; the contiguous mode takes none",
		`{"mode":"minimal","return_delay_ms":"10s"}`:  "bad_request: body: json: cannot unmarshal string",
	} {
		_, err := movementCommand(testRing, []byte(body), 9)
		if !errors.Is(err, lease.ErrBadRequest) || len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}
