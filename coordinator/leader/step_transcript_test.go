package leader

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/testkit/transcript"
)

// TestStepTranscripts runs testdata/step/*.txt: Step on inputs written out by hand, what it
// decides, and the state once what it decided is committed. The leader was elected at 0s with
// testTiming (holder bound 1.6015s) and the default leader lease and grace, so it expires
// nothing before 1.8515s and downs nobody before 2.75s.
//
//	state join a | state down a | state plan   a command committed by an earlier leader (members
//	state release a 3 | state floor 1000 [settle] are a/1, b/1, ...), fsm.Plan committed, a Release,
//	state movement minimal                       an EpochFloor (with Settle), a SetMovement
//	conn a | gone a       a's connection streams to this leader, or is gone
//	release a 3           a's ring.release of epoch 3 waits for the next pass
//	gate reconcile off    the version gate keeps Reconcile out (also: timing, floor; on)
//	local settling        this term settles the state on its own (the gate kept its floor out)
//	at 1.9s               now, from the election
//	step                  one pass: what Step decides, committed as the coordinator commits it
//	ring                  the committed ring
func TestStepTranscripts(t *testing.T) {
	transcript.RunDir(t, "testdata/step", func() transcript.Driver {
		d := &stepDriver{state: fsm.NewState(), conns: map[Member]Conn{}, sends: Sends{}, recent: Recent{},
			gate: Gate{Reconcile: true, CommitTiming: true, EpochFloor: false}}
		return d.command
	})
}

type stepDriver struct {
	state    *fsm.State
	now      time.Duration
	conns    map[Member]Conn
	sends    Sends
	releases []fsm.Release
	seen     Seen
	recent   Recent
	gate     Gate
	local    bool
}

func stepTimes() Times {
	return Times{ElectedAt: t0, LeaderLease: defaultLeaderLease, HolderBound: testTiming.HolderBound(),
		InheritedBound: testTiming.HolderBound(), GraceEnd: t0.Add(defaultSilenceTimeout).Add(defaultReconnectGrace)}
}

func (d *stepDriver) member(c transcript.Command, at int) (Member, error) {
	if len(c.Args) <= at {
		return Member{}, errors.New("name a worker")
	}
	return Member{Ring: fsm.RingID(testRing), WorkerID: c.Args[at], Incarnation: "1"}, nil
}

func (d *stepDriver) command(c transcript.Command) (string, error) {
	switch c.Name {
	case "state":
		return d.commitState(c)
	case "conn", "gone":
		m, err := d.member(c, 0)
		if err != nil {
			return "", err
		}
		if c.Name == "gone" {
			delete(d.conns, m)
			return transcript.FormatMember(m.WorkerID, m.Incarnation) + " has no connection", nil
		}
		d.conns[m] = Conn{Ring: testRing, Live: true, Streaming: true}
		return transcript.FormatMember(m.WorkerID, m.Incarnation) + " streams", nil
	case "release":
		m, err := d.member(c, 0)
		if err != nil || len(c.Args) != 2 {
			return "", errors.New("want: release WORKER EPOCH")
		}
		e, err := strconv.ParseUint(c.Args[1], 10, 64)
		if err != nil {
			return "", err
		}
		d.releases = append(d.releases, fsm.Release{Ring: testRing, WorkerID: m.WorkerID, Incarnation: m.Incarnation, Epoch: e})
		return "waits for the next pass", nil
	case "gate":
		if len(c.Args) != 2 || (c.Args[1] != "on" && c.Args[1] != "off") {
			return "", errors.New("want: gate reconcile|timing|floor on|off")
		}
		on := c.Args[1] == "on"
		switch c.Args[0] {
		case "reconcile":
			d.gate.Reconcile = on
		case "timing":
			d.gate.CommitTiming = on
		case "floor":
			d.gate.EpochFloor = on
		default:
			return "", errors.New("want: gate reconcile|timing|floor on|off")
		}
		return "", nil
	case "local":
		d.local = true
		return "", nil
	case "at":
		if len(c.Args) != 1 {
			return "", errors.New("give a duration")
		}
		at, err := time.ParseDuration(c.Args[0])
		if err != nil {
			return "", err
		}
		d.now = at
		return "", nil
	case "step":
		return d.step(), nil
	case "ring":
		return transcript.FormatRing(d.state.Ring(testRing)), nil
	}
	return "", errors.New("unknown command")
}

func (d *stepDriver) commitState(c transcript.Command) (string, error) {
	if len(c.Args) == 0 {
		return "", errors.New("name a command")
	}
	var cmd fsm.Command
	sub := transcript.Command{Name: c.Args[0], Args: c.Args[1:]}
	m, _ := d.member(sub, 0)
	switch sub.Name {
	case "join":
		cmd = &fsm.Join{Ring: testRing, WorkerID: m.WorkerID, Incarnation: m.Incarnation}
	case "down":
		cmd = &fsm.Down{Ring: testRing, WorkerID: m.WorkerID, Incarnation: m.Incarnation}
	case "release":
		if len(sub.Args) != 2 {
			return "", errors.New("want: state release WORKER EPOCH")
		}
		e, err := strconv.ParseUint(sub.Args[1], 10, 64)
		if err != nil {
			return "", err
		}
		cmd = &fsm.Release{Ring: testRing, WorkerID: m.WorkerID, Incarnation: m.Incarnation, Epoch: e}
	case "plan":
		plan := fsm.Plan(d.state.Ring(testRing))
		if plan == nil {
			return "nothing to plan", nil
		}
		cmd = plan
	case "floor":
		if len(sub.Args) < 1 {
			return "", errors.New("want: state floor N [settle]")
		}
		f, err := strconv.ParseUint(sub.Args[0], 10, 64)
		if err != nil {
			return "", err
		}
		cmd = &fsm.EpochFloor{Floor: f, Settle: len(sub.Args) > 1 && sub.Args[1] == "settle", Reason: "bootstrap"}
	case "movement":
		cmd = &fsm.SetMovement{Ring: testRing, Mode: fsm.ModeMinimal}
	default:
		return "", errors.New("unknown state command")
	}
	if err := d.state.Apply(cmd); err != nil {
		return "refused: " + err.Error(), nil
	}
	return "committed " + transcript.FormatCommand(cmd), nil
}

// step runs Step on the driver's input and commits its output as leaderTerm.reconcile does:
// the entries of their own one by one, then one entry per ring (or, while the gate keeps
// Reconcile out, the waiting releases, the decisions one by one, then a plan of the ring).
func (d *stepDriver) step() string {
	now := t0.Add(d.now)
	rings := map[string]*fsm.Ring{}
	for id, r := range d.state.Rings {
		rings[id] = r.Clone()
	}
	in := Input{Now: now, Times: stepTimes(), Rings: rings, Conns: d.conns, Sends: d.sends.Clone(),
		Releases: d.releases, Seen: d.seen, Recent: d.recent, Own: fsm.NewLeaseTiming("c1", testTiming.WithDefaults()),
		TimingCommitted: true, SettleLocal: d.local, Gate: d.gate,
		State: StateFacts{Timing: d.state.Timing, EpochFloor: d.state.EpochFloor, Settling: d.state.Settling,
			FloorAt: fsm.FloorAt(now, d.state)}}
	releases := d.releases
	d.releases = nil
	out := Step(in)
	d.seen = out.Seen
	var lines []string
	say := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	if out.HoldPlan {
		say("no plan: the state is settling")
	}
	if out.EndSettleLocal {
		d.local = false
		say("this term's own settling ends")
	}
	commit := func(what string, c fsm.Command) {
		if err := d.state.Apply(c); err != nil {
			say("%s %s: refused: %v", what, transcript.FormatCommand(c), err)
			return
		}
		d.recent.Mark(c, now)
		say("%s %s", what, transcript.FormatCommand(c))
	}
	for _, c := range out.Commit {
		commit("commit", c)
	}
	for _, rf := range out.Refused {
		r := releases[rf.Release]
		say("answer release %s e%d: %v", transcript.FormatMember(r.WorkerID, r.Incarnation), r.Epoch, rf.Err)
	}
	for _, p := range out.Passes {
		commit("commit", p.Command())
	}
	if !d.gate.Reconcile {
		for i := range releases {
			commit("commit", &releases[i])
		}
		for _, c := range out.Unbatched {
			commit("commit", c)
		}
		if r := d.state.Ring(testRing); r != nil && !out.HoldPlan {
			if plan := fsm.Plan(r); plan != nil {
				commit("commit", plan)
			}
		}
	}
	if out.Wake.IsZero() {
		say("nothing pending")
	} else {
		say("next decision due at %v", out.Wake.Sub(t0))
	}
	return strings.Join(lines, "\n")
}
