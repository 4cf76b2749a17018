package leader

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/transcript"
)

// TestDecideTranscripts runs testdata/decide/*.txt: the leader's decisions (decideRing, then
// fsm.Plan, as its reconcile pass runs them) on the simulation's manual clock, with what the
// workers receive. Times print as offsets from the start, when the leader has led for long; the
// timing is testTiming's (TTL 1.5s, renewal 300ms, margin 100ms, so a holder bound of 1.6015s)
// with the default leader lease (250ms), silence timeout (750ms) and reconnect grace (2s).
//
//	join a          a new process of worker a (a new incarnation) connects and subscribes; an older
//	                process of a is cut off and may still use what it holds
//	crash a         a's process stops talking to the leader (a crash, a hang, a cut)
//	reconnect a     a's last process comes back with its incarnation
//	release a [e]   a sends ring.release of epoch e (default: the epoch it last switched to that
//	                dropped something): it uses nothing older; the leader's next pass commits it
//	leave a         a stops using everything and commits ring.leave
//	advance 1.5s    time passes; the leader renews every lease at each renewal tick in it
//	decide          the leader reacts: reconcile passes until one commits nothing, each followed by
//	                the elements of new assignments, streamed at once; then when the next pending
//	                decision becomes due
//	elect           a new leader takes over now, knowing no send of any earlier one; the connected
//	                workers subscribe to it at once
//	elect c2 ttl 3s renewal 1s
//	                the same, by node c2 running that lease timing: it commits its timing first,
//	                and bounds what earlier leaders sent by the longest timing committed
//	timing          the committed lease timing: in force, and the longest
//	ring            the committed ring
//	check           whether any token or Node-0 was usable by two workers at once, by every
//	                element streamed so far
//
// A worker asks for its next element as soon as it receives one, so an element is usable from the
// moment the worker received the previous one: "usable until" is that instant plus TTL×(1+ρ).
func TestDecideTranscripts(t *testing.T) {
	transcript.RunDir(t, "testdata/decide", func() transcript.Driver {
		s := newSim()
		s.newTerm(t0.Add(-time.Minute))
		return s.transcriptCommand
	})
}

func (s *sim) transcriptCommand(c transcript.Command) (string, error) {
	proc := func() (*simProc, error) {
		if len(c.Args) == 0 {
			return nil, fmt.Errorf("name a worker")
		}
		for i := len(s.procs) - 1; i >= 0; i-- {
			if s.procs[i].id == c.Args[0] {
				return s.procs[i], nil
			}
		}
		return nil, fmt.Errorf("no process of worker %s", c.Args[0])
	}
	switch c.Name {
	case "join":
		if len(c.Args) != 1 {
			return "", fmt.Errorf("name a worker")
		}
		var out []string
		for _, p := range s.procs {
			if p.id == c.Args[0] && p.connected {
				out = append(out, name(p)+" cut off")
			}
		}
		return strings.Join(append(out, name(s.start(c.Args[0]))+" subscribes"), "\n"), nil
	case "crash":
		p, err := proc()
		if err != nil {
			return "", err
		}
		p.connected = false
		return name(p) + " gone", nil
	case "reconnect":
		p, err := proc()
		if err != nil {
			return "", err
		}
		p.connected, p.demanding, p.demandAt, p.lastEpoch = true, true, s.now, 0
		return name(p) + " subscribes again", nil
	case "release":
		p, err := proc()
		if err != nil {
			return "", err
		}
		epoch := p.releasable
		if len(c.Args) > 1 {
			if epoch, err = strconv.ParseUint(c.Args[1], 10, 64); err != nil {
				return "", err
			}
		}
		s.queueRelease(fsm.Release{Ring: testRing, WorkerID: p.id, Incarnation: p.inc, Epoch: epoch})
		return fmt.Sprintf("%s releases e%d: committed with the leader's next pass", name(p), epoch), nil
	case "leave":
		p, err := proc()
		if err != nil {
			return "", err
		}
		p.connected, p.leftAt = false, s.now
		return s.commitWorkerCommand(&fsm.Leave{Ring: testRing, WorkerID: p.id, Incarnation: p.inc}), nil
	case "advance":
		if len(c.Args) != 1 {
			return "", fmt.Errorf("give a duration")
		}
		d, err := time.ParseDuration(c.Args[0])
		if err != nil {
			return "", err
		}
		return s.advance(d), nil
	case "decide":
		return s.decide(), nil
	case "elect":
		timed := len(c.Args) > 0
		if timed {
			if err := s.parseLeader(c.Args); err != nil {
				return "", err
			}
		}
		s.newTerm(s.now)
		for _, p := range s.procs {
			p.lastEpoch = 0
		}
		if !timed {
			return fmt.Sprintf("new leader elected at %s: it expires nothing before %s, and downs a member that has not subscribed to it at %s",
				since(s.now), since(s.tt.HoldsAliveUntil()), since(s.tt.DownAfter())), nil
		}
		return fmt.Sprintf("%s elected at %s, running TTL %v (holder bound %v); it commits that timing, then bounds earlier leases by the longest committed (holder bound %v): it expires nothing before %s, and downs a member that has not subscribed to it at %s",
			s.leader, since(s.now), s.timing.TTL, s.tt.HolderBound, s.tt.InheritedBound, since(s.tt.HoldsAliveUntil()), since(s.tt.DownAfter())), nil
	case "timing":
		ts := s.state.Timing
		return fmt.Sprintf("in force: %s\nlongest: %s", transcript.FormatTiming(ts.InForce), transcript.FormatTiming(ts.Longest)), nil
	case "ring":
		return transcript.FormatRing(s.state.Ring(testRing)), nil
	case "check":
		if err := s.exclusive(); err != nil {
			return "violation: " + err.Error(), nil
		}
		return "no token and no Node-0 was usable by two workers at once", nil
	}
	return "", fmt.Errorf("unknown command")
}

// parseLeader reads "NODE ttl D renewal D" into the sim's next leader and its timing.
func (s *sim) parseLeader(args []string) error {
	if len(args) != 5 || args[1] != "ttl" || args[3] != "renewal" {
		return fmt.Errorf("want: elect NODE ttl DURATION renewal DURATION")
	}
	ttl, err := time.ParseDuration(args[2])
	if err != nil {
		return err
	}
	renewal, err := time.ParseDuration(args[4])
	if err != nil {
		return err
	}
	timing := lease.Timing{TTL: ttl, Renewal: renewal}.WithDefaults()
	if err := timing.Validate(); err != nil {
		return err
	}
	s.leader, s.timing = args[0], timing
	return nil
}

func name(p *simProc) string { return transcript.FormatMember(p.id, p.inc) }

func since(t time.Time) string { return t.Sub(t0).String() }

// commitWorkerCommand commits a command a worker sent (leave), as the leader does on its request.
func (s *sim) commitWorkerCommand(c fsm.Command) string {
	if err := s.state.Apply(c); err != nil {
		return "refused: " + err.Error()
	}
	return "commit " + transcript.FormatCommand(c)
}

// decide runs reconcile passes until one commits nothing, as the leader does: every commit wakes
// it again.
func (s *sim) decide() string {
	var out []string
	for range 10 {
		committed, wake := s.decideAndApply(s.state)
		if len(committed) == 0 {
			if !wake.IsZero() {
				out = append(out, "next decision due at "+since(wake))
			}
			break
		}
		for _, c := range committed {
			if _, ok := c.(*fsm.Reconcile); ok {
				out = append(out, "commit "+transcript.FormatCommand(c))
				continue
			}
			out = append(out, "commit "+strings.ReplaceAll(transcript.FormatCommand(c), "\n", "\ncommit "))
		}
		for _, e := range s.stream(false) {
			out = append(out, fmt.Sprintf("send %s, usable until %s", e.what, since(e.usableUntil)))
		}
	}
	if len(out) == 0 {
		return "nothing to do"
	}
	return strings.Join(out, "\n")
}

// advance moves the clock by d, through the leader's renewal ticks (every Renewal from its
// election). Consecutive ticks that sent the same elements print as one line.
func (s *sim) advance(d time.Duration) string {
	end := s.now.Add(d)
	period := s.timing.Renewal
	next := s.tt.ElectedAt.Add((s.now.Sub(s.tt.ElectedAt)/period + 1) * period)
	var out []string
	var first, last time.Time
	var sent string
	flush := func() {
		switch {
		case sent == "":
		case first.Equal(last):
			out = append(out, fmt.Sprintf("renewal at %s: %s", since(first), sent))
		default:
			out = append(out, fmt.Sprintf("renewals every %s from %s to %s: %s", period, since(first), since(last), sent))
		}
	}
	for ; !next.After(end); next = next.Add(period) {
		s.now = next
		var what []string
		for _, e := range s.stream(true) {
			what = append(what, e.what)
		}
		if w := strings.Join(what, ", "); w != sent || sent == "" {
			flush()
			first, sent = next, w
		}
		last = next
	}
	flush()
	s.now = end
	return strings.Join(append(out, "now "+since(end)), "\n")
}

// element is one lease element the leader streamed.
type element struct {
	what        string // member and assignment
	usableUntil time.Time
}

// stream answers outstanding demand (every demand when renew, else only with new assignments).
// Each worker that received an element asks for the next at once.
func (s *sim) stream(renew bool) []element {
	had := make([]int, len(s.procs))
	for i, p := range s.procs {
		had[i] = len(p.got)
	}
	s.deliver(renew)
	var out []element
	for i, p := range s.procs {
		for _, l := range p.got[had[i]:] {
			out = append(out, element{
				what: transcript.FormatAssignment(fsm.Assignment{WorkerID: p.id, Incarnation: p.inc, Epoch: l.Epoch,
					NodeIndex: l.NodeIndex, NodeCount: l.NodeCount, Ranges: l.Ranges}),
				usableUntil: s.usableUntil(l),
			})
		}
		if p.connected && !p.demanding {
			p.demanding, p.demandAt = true, s.now
		}
	}
	return out
}
