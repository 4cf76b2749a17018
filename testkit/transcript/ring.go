package transcript

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// FormatMember names a member as worker/incarnation.
func FormatMember(workerID, incarnation string) string { return workerID + "/" + incarnation }

// FormatRanges prints ranges with the ends of the ring as min and max, "[]" when there are none.
func FormatRanges(rs lease.Ranges) string {
	if len(rs) == 0 {
		return "[]"
	}
	token := func(t int64) string {
		switch t {
		case lease.MinToken:
			return "min"
		case lease.MaxToken:
			return "max"
		}
		return strconv.FormatInt(t, 10)
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = "[" + token(r.Start) + "," + token(r.End) + "]"
	}
	return strings.Join(parts, " ")
}

// FormatAssignment prints one assignment: member, epoch, node index of count, ranges.
func FormatAssignment(a fsm.Assignment) string {
	return FormatMember(a.WorkerID, a.Incarnation) + " " + assignment(a.Epoch, a.NodeIndex, a.NodeCount, a.Ranges)
}

func assignment(epoch uint64, index, count int, ranges lease.Ranges) string {
	return fmt.Sprintf("e%d node %d/%d %s", epoch, index, count, FormatRanges(ranges))
}

// FormatCommand prints a ring command; an Assign takes one line per assignment, a Reconcile a
// line of its own and one indented line per part.
func FormatCommand(c fsm.Command) string {
	switch c := c.(type) {
	case *fsm.Reconcile:
		lines := []string{"one entry:"}
		for _, part := range c.Commands() {
			for _, l := range strings.Split(FormatCommand(part), "\n") {
				lines = append(lines, "  "+l)
			}
		}
		return strings.Join(lines, "\n")
	case *fsm.Join:
		return "join " + FormatMember(c.WorkerID, c.Incarnation)
	case *fsm.Down:
		return "down " + FormatMember(c.WorkerID, c.Incarnation)
	case *fsm.Leave:
		return "leave " + FormatMember(c.WorkerID, c.Incarnation)
	case *fsm.Release:
		return fmt.Sprintf("release %s e%d", FormatMember(c.WorkerID, c.Incarnation), c.Epoch)
	case *fsm.Expire:
		return fmt.Sprintf("expire %s up to e%d (generation %d)", FormatMember(c.WorkerID, c.Incarnation), c.UpTo, c.Generation)
	case *fsm.CommitTiming:
		return "commit_timing " + FormatTiming(c.Timing)
	case *fsm.RetireTiming:
		return fmt.Sprintf("retire_timing %s: the longest is now %s", FormatTiming(c.Retire), FormatTiming(c.Keep))
	case *fsm.Assign:
		lines := make([]string, len(c.Assignments))
		for i, a := range c.Assignments {
			lines[i] = "assign " + FormatAssignment(a)
		}
		return strings.Join(lines, "\n")
	case *fsm.EpochFloor:
		switch {
		case c.Settled:
			return fmt.Sprintf("epoch_floor %d settled", c.Floor)
		case c.Settle:
			return fmt.Sprintf("epoch_floor %d settle (%s)", c.Floor, c.Reason)
		}
		return fmt.Sprintf("epoch_floor %d (%s)", c.Floor, c.Reason)
	case *fsm.SetMovement:
		return "set_movement " + c.Mode
	case *fsm.HandOn:
		return fmt.Sprintf("hand_on %s's slot (generation %d)", c.WorkerID, c.Generation)
	case *fsm.EvenOut:
		return fmt.Sprintf("even_out step %d (generation %d)", c.Step, c.Generation)
	}
	return fmt.Sprintf("%s %+v", c.Type(), c)
}

// FormatTiming prints a committed lease timing: its coordinator, TTL, renewal and holder bound.
func FormatTiming(t fsm.LeaseTiming) string {
	return fmt.Sprintf("%s's TTL %v, renewal %v (holder bound %v)", t.Coordinator, t.TTL, t.Renewal, t.HolderBound())
}

// FormatRing prints a ring's committed state: its generation and last epoch, then every member in
// join order with its current assignment and, indented below it, its holds.
func FormatRing(r *fsm.Ring) string {
	if r == nil {
		return "no ring"
	}
	lines := []string{fmt.Sprintf("generation %d, last epoch %d", r.Generation, r.LastEpoch)}
	for _, m := range r.SortedMembers() {
		state := "active"
		if !m.Active {
			state = "departed"
		}
		name := FormatMember(m.WorkerID, m.Incarnation)
		if !m.Assigned() {
			lines = append(lines, fmt.Sprintf("%s %s, nothing assigned", name, state))
		} else {
			lines = append(lines, name+" "+state+" "+assignment(m.Epoch, m.NodeIndex, m.NodeCount, m.Ranges))
		}
		for _, h := range m.Holds {
			hold := fmt.Sprintf("  holds e%d %s", h.Epoch, FormatRanges(h.Ranges))
			if h.Node0 {
				hold += " and node 0"
			}
			lines = append(lines, hold)
		}
	}
	return strings.Join(lines, "\n")
}
