package fsm_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/testkit/transcript"
)

// TestPlanTranscripts runs testdata/plan/*.txt: the planner's rules as sessions of committed
// commands and plans on one ring, without time (what time adds is in coordinator/leader/testdata/decide).
//
//	join a | join a/2    a Join of worker a (incarnation 1 unless given)
//	down a/1 | leave a/1 a Down or a Leave of the member
//	release a/1 3        a Release of epoch 3: the member uses nothing older
//	expire a/1 3         an Expire up to epoch 3, decided on the ring's current generation
//	plan                 fsm.Plan on the committed ring, printed, then committed
//	ring                 the committed ring
//	floor 1000 | settle 1000 | settled
//	                     an EpochFloor of 1000 (with Settle), or the Settled that ends the settling
//	movement minimal [0.25 [8]] | movement contiguous
//	                     a SetMovement (tolerance and max ranges optional)
//	handon a             a HandOn of worker a's reserved slot, decided on the current generation
//	target               the minimal mode's target, slot by slot in node-index order
func TestPlanTranscripts(t *testing.T) {
	transcript.RunDir(t, "testdata/plan", func() transcript.Driver {
		s := fsm.NewState()
		return func(c transcript.Command) (string, error) { return planCommand(s, c) }
	})
}

func planCommand(s *fsm.State, c transcript.Command) (string, error) {
	member := func() (worker, inc string, err error) {
		if len(c.Args) == 0 {
			return "", "", fmt.Errorf("name a member: worker or worker/incarnation")
		}
		worker, inc, found := strings.Cut(c.Args[0], "/")
		if !found {
			inc = "1"
		}
		return worker, inc, nil
	}
	epoch := func() (uint64, error) {
		if len(c.Args) != 2 {
			return 0, fmt.Errorf("want a member and an epoch")
		}
		return strconv.ParseUint(c.Args[1], 10, 64)
	}
	var cmd fsm.Command
	switch c.Name {
	case "ring":
		return transcript.FormatRing(s.Ring(ringA)), nil
	case "target":
		return formatTarget(s.Ring(ringA)), nil
	case "movement":
		if len(c.Args) < 1 || len(c.Args) > 3 {
			return "", fmt.Errorf("want a mode, then optionally a tolerance and max ranges")
		}
		m := &fsm.SetMovement{Ring: ringA, Mode: c.Args[0]}
		if len(c.Args) > 1 {
			v, err := strconv.ParseFloat(c.Args[1], 64)
			if err != nil {
				return "", err
			}
			m.Tolerance = v
		}
		if len(c.Args) > 2 {
			v, err := strconv.Atoi(c.Args[2])
			if err != nil {
				return "", err
			}
			m.MaxRanges = v
		}
		cmd = m
	case "handon":
		if len(c.Args) != 1 {
			return "", fmt.Errorf("want a worker id")
		}
		var gen uint64
		if r := s.Ring(ringA); r != nil {
			gen = r.Generation
		}
		cmd = &fsm.HandOn{Ring: ringA, WorkerID: c.Args[0], Generation: gen}
	case "plan":
		a := fsm.Plan(s.Ring(ringA))
		if a == nil {
			return "nothing to change", nil
		}
		if err := s.Apply(a); err != nil {
			return transcript.FormatCommand(a) + "\nrefused: " + err.Error(), nil
		}
		return transcript.FormatCommand(a), nil
	case "join", "down", "leave":
		w, inc, err := member()
		if err != nil {
			return "", err
		}
		switch c.Name {
		case "join":
			cmd = &fsm.Join{Ring: ringA, WorkerID: w, Incarnation: inc}
		case "down":
			cmd = &fsm.Down{Ring: ringA, WorkerID: w, Incarnation: inc}
		default:
			cmd = &fsm.Leave{Ring: ringA, WorkerID: w, Incarnation: inc}
		}
	case "floor", "settle", "settled":
		f := s.EpochFloor
		if c.Name != "settled" {
			if len(c.Args) != 1 {
				return "", fmt.Errorf("want the floor")
			}
			v, err := strconv.ParseUint(c.Args[0], 10, 64)
			if err != nil {
				return "", err
			}
			f = v
		}
		cmd = &fsm.EpochFloor{Floor: f, Settle: c.Name == "settle", Settled: c.Name == "settled"}
	case "release", "expire":
		w, inc, err := member()
		if err != nil {
			return "", err
		}
		e, err := epoch()
		if err != nil {
			return "", err
		}
		if c.Name == "release" {
			cmd = &fsm.Release{Ring: ringA, WorkerID: w, Incarnation: inc, Epoch: e}
		} else {
			var gen uint64
			if r := s.Ring(ringA); r != nil {
				gen = r.Generation
			}
			cmd = &fsm.Expire{Ring: ringA, WorkerID: w, Incarnation: inc, UpTo: e, Generation: gen}
		}
	default:
		return "", fmt.Errorf("unknown command")
	}
	if err := s.Apply(cmd); err != nil {
		return "refused: " + err.Error(), nil
	}
	return "ok", nil
}

// formatTarget prints a minimal-mode ring's target: one slot a line, node index, worker id, share
// of the ring and ranges, "reserved" for a worker id waiting for a return or a hand-on.
func formatTarget(r *fsm.Ring) string {
	if r == nil || r.Movement == nil {
		return "contiguous mode"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "minimal mode, tolerance %v, max ranges %d", r.Movement.Tolerance, r.Movement.MaxRanges)
	for i, slot := range r.Movement.Target {
		state := ""
		if slot.Reserved {
			state = fmt.Sprintf(" reserved at generation %d", slot.ReservedAt)
		}
		fmt.Fprintf(&b, "\n%d %s%s %.4f %s", i, slot.WorkerID, state, slot.Ranges.Fraction(), transcript.FormatRanges(slot.Ranges))
	}
	return b.String()
}
