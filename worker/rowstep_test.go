package worker

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/transcript"
	"github.com/retryring/retryring/window"
	"github.com/retryring/retryring/worker/retrypolicy"
)

// rowDay is the day of the transcripts' row: found in window 11:00 of pod-a, worker w1.
var rowDay = time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)

// TestRowTranscripts runs testdata/row/*.txt: the row protocol's pure core (rowState) as sessions
// of the events its driver feeds it and the actions it answers, without Cassandra, an executor or a
// clock. Every answer prints the counters it bumps ("count ...") and then the action.
//
//	row [attempt=0] [replay=0] [max_attempts=3]
//	                     a new row of Payment (tx-1, pod-a, window 11:00, worker w1); its first action
//	marker [none] [committed] [dead_lettered] [in_progress=w2] [floor=r0/a2] [state_ttl=1h]
//	       [floor_ttl=1h] under=e1
//	                     the marker read, under the lease of epoch 1
//	ok [under=e1]        the action succeeded
//	refused no_lease|expired|too_short|token_not_leased|stalled
//	                     the guard refused the action
//	held paused|impl_paused|breaker_open|no_share|stopped
//	                     admission refused the execution (no_share: this worker has no share of
//	                     the ring's rate; stopped: the worker stopped while the row waited for a
//	                     token of the throttle)
//	failed | stopped     the query failed; the worker stopped before it could start
//	executed done|transient|permanent|not_sent [status=503] [retry_after=90s] [error=word] under=e1
//	                     the executor's outcome, under the lease of epoch 1
//	breaker_settled at=11:00:30
//	                     the breaker was settled, the clock reading 11:00:30 on the row's day
//	guard e2|<refusal> [at=+59s]
//	                     what the last action's guard makes of the guard's answer: the current
//	                     lease of epoch 2, or a refusal as above; at is the clock, after 11:00.
//	                     It does not step the row.
//
// Every lease is on the whole ring and valid for a minute from 11:00.
func TestRowTranscripts(t *testing.T) {
	transcript.RunDir(t, "testdata/row", func() transcript.Driver {
		d := &rowTranscript{}
		return d.do
	})
}

// rowTranscript is the state of one transcript: the row and the last action it answered.
type rowTranscript struct {
	row  *rowState
	last rowAction
}

const rowToken = 42

// rowLease is the lease of epoch e on the whole ring, valid for a minute from 11:00 of the row's day.
func rowLease(e uint64) lease.Lease {
	return lease.Lease{WorkerID: "w1", Epoch: e, Ranges: lease.Ranges{lease.FullRing}, TTL: time.Minute, ValidFrom: rowDay.Add(11 * time.Hour)}
}

func (d *rowTranscript) do(c transcript.Command) (string, error) {
	args, err := rowArgs(c.Args)
	if err != nil {
		return "", err
	}
	if c.Name == "row" {
		return d.start(args)
	}
	if d.row == nil {
		return "", fmt.Errorf("no row yet: start with row")
	}
	var ev rowEvent
	if e, ok := args["under"]; ok {
		l, err := parseEpoch(e)
		if err != nil {
			return "", err
		}
		ev.lease = l
	}
	switch c.Name {
	case "guard":
		return d.guard(c.Args, args)
	case "ok":
	case "marker":
		if ev.marker, ev.found, err = parseMarker(c.Args, args); err != nil {
			return "", err
		}
	case "refused", "held":
		if len(c.Args) != 1 || rowRefusals[c.Name][c.Args[0]] == nil {
			return "", fmt.Errorf("want one reason of %v", slices.Sorted(maps.Keys(rowRefusals[c.Name])))
		}
		ev.err = rowRefusals[c.Name][c.Args[0]]
	case "failed":
		ev.err = errors.New("query timed out")
	case "stopped":
		ev.err = fmt.Errorf("%w: context canceled", ErrStopped)
	case "executed":
		if ev.out, err = parseOutcome(c.Args, args); err != nil {
			return "", err
		}
	case "breaker_settled":
		at, err := time.Parse("15:04:05", args["at"])
		if err != nil {
			return "", fmt.Errorf("at: %w", err)
		}
		ev.now = rowDay.Add(time.Duration(at.Hour())*time.Hour + time.Duration(at.Minute())*time.Minute + time.Duration(at.Second())*time.Second)
	default:
		return "", fmt.Errorf("unknown command")
	}
	d.last = d.row.next(ev)
	return formatRowAction(d.last), nil
}

func (d *rowTranscript) start(args map[string]string) (string, error) {
	attempt, replay, maxAttempts := 0, 0, 3
	for name, v := range map[string]*int{"attempt": &attempt, "replay": &replay, "max_attempts": &maxAttempts} {
		if s, ok := args[name]; ok {
			n, err := strconv.Atoi(s)
			if err != nil {
				return "", fmt.Errorf("%s: %w", name, err)
			}
			*v = n
		}
	}
	w, err := window.New(window.DateOf(rowDay), 660, 1)
	if err != nil {
		return "", err
	}
	b := cassandra.BucketKey{Window: w, InstanceID: "pod-a", Bucket: 0}
	t := cassandra.Transaction{ID: "tx-1", ImplType: "Payment", Attempt: attempt, Replay: replay}
	p := retrypolicy.Default()
	p.MaxAttempts = maxAttempts
	p.MaxDelay = 30 * time.Minute
	d.row = newRowState("w1", b, t, p, 1, time.Second)
	d.last = d.row.next(rowEvent{})
	return formatRowAction(d.last), nil
}

// guard prints what the last action's guard makes of the guard's answer in args.
func (d *rowTranscript) guard(pos []string, args map[string]string) (string, error) {
	if len(pos) == 0 {
		return "", fmt.Errorf("want e<epoch> or a refusal")
	}
	var l lease.Lease
	var err error
	if refused, ok := rowRefusals["refused"][pos[0]]; ok {
		err = refused
	} else if l, err = parseEpoch(pos[0]); err != nil {
		return "", err
	}
	now := rowDay.Add(11 * time.Hour)
	if at, ok := args["at"]; ok {
		after, perr := time.ParseDuration(strings.TrimPrefix(at, "+"))
		if perr != nil {
			return "", fmt.Errorf("at: %w", perr)
		}
		now = now.Add(after)
	}
	got, err := d.last.guard.allow(rowToken, l, err, time.Second, func() time.Time { return now })
	if err != nil {
		return "refused: " + err.Error(), nil
	}
	return fmt.Sprintf("allowed under e%d", got.Epoch), nil
}

// rowArgs reads the name=value arguments; the others are positional.
func rowArgs(args []string) (map[string]string, error) {
	m := map[string]string{}
	for _, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok {
			if k == "" || v == "" {
				return nil, fmt.Errorf("bad argument %q", a)
			}
			m[k] = v
		}
	}
	return m, nil
}

func positional(args []string) []string {
	var p []string
	for _, a := range args {
		if !strings.Contains(a, "=") {
			p = append(p, a)
		}
	}
	return p
}

func parseEpoch(s string) (lease.Lease, error) {
	e, err := strconv.ParseUint(strings.TrimPrefix(s, "e"), 10, 64)
	if err != nil || !strings.HasPrefix(s, "e") {
		return lease.Lease{}, fmt.Errorf("want e<epoch>, not %q", s)
	}
	return rowLease(e), nil
}

func parseCopy(s string) (cassandra.Copy, error) {
	var c cassandra.Copy
	if _, err := fmt.Sscanf(s, "r%d/a%d", &c.Replay, &c.Attempt); err != nil {
		return c, fmt.Errorf("want r<replay>/a<attempt>, not %q", s)
	}
	return c, nil
}

func parseMarker(args []string, named map[string]string) (m cassandra.Marker, found bool, err error) {
	found = true
	for _, a := range positional(args) {
		switch a {
		case "none":
			found = false
		case "committed":
			m.State = cassandra.MarkerCommitted
		case "dead_lettered":
			m.State = cassandra.MarkerDeadLettered
		default:
			return m, false, fmt.Errorf("unknown marker state %q", a)
		}
	}
	if w, ok := named["in_progress"]; ok {
		m.InProgressOwner = w
		if m.State == "" {
			m.State = cassandra.MarkerInProgress
		}
	}
	if f, ok := named["floor"]; ok {
		if m.Floor, err = parseCopy(f); err != nil {
			return m, false, err
		}
		m.HasFloor = true
	}
	for name, ttl := range map[string]*time.Duration{"state_ttl": &m.StateTTL, "floor_ttl": &m.FloorTTL} {
		if s, ok := named[name]; ok {
			if *ttl, err = time.ParseDuration(s); err != nil {
				return m, false, fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	return m, found, nil
}

// rowRefusals are the errors of the refused and held commands.
var rowRefusals = map[string]map[string]error{
	"refused": {
		"no_lease": lease.ErrNoLease, "expired": lease.ErrLeaseExpired, "too_short": lease.ErrLeaseTooShort,
		"token_not_leased": lease.ErrTokenNotLeased, "stalled": fmt.Errorf("%w: %w", lease.ErrLeaseTooShort, errStalled),
	},
	"held": {
		"paused": errRingPaused, "impl_paused": errImplPaused, "breaker_open": errBreakerOpen,
		"no_share": errNoShare, "stopped": ErrStopped,
	},
}

func parseOutcome(args []string, named map[string]string) (Outcome, error) {
	var out Outcome
	p := positional(args)
	if len(p) != 1 {
		return out, fmt.Errorf("want one outcome")
	}
	for _, k := range []OutcomeKind{Done, Transient, Permanent, NotSent} {
		if k.String() == p[0] {
			out.Kind = k
		}
	}
	if out.Kind == 0 {
		return out, fmt.Errorf("unknown outcome %q", p[0])
	}
	var err error
	if s, ok := named["status"]; ok {
		if out.Status, err = strconv.Atoi(s); err != nil {
			return out, fmt.Errorf("status: %w", err)
		}
	}
	if s, ok := named["retry_after"]; ok {
		if out.RetryAfter, err = time.ParseDuration(s); err != nil {
			return out, fmt.Errorf("retry_after: %w", err)
		}
	}
	if s, ok := named["error"]; ok {
		out.Err = errors.New(s)
	}
	return out, nil
}

var rowCountNames = map[rowCount]string{
	countSkippedCommitted: "skipped_committed", countSkippedSuperseded: "skipped_superseded",
	countSkippedDeadLettered: "skipped_dead_lettered", countSkippedInProgress: "skipped_in_progress",
	countNotSent: "not_sent", countExecuted: "executed", countDone: "done", countTransient: "transient",
	countPermanent: "permanent", countCommitted: "committed", countRerecorded: "rerecorded",
	countDeadLettered: "dead_lettered", countErrors: "errors",
}

// formatRowAction prints an action as the transcripts show it.
func formatRowAction(a rowAction) string {
	var lines []string
	if len(a.counts) > 0 {
		names := make([]string, len(a.counts))
		for i, c := range a.counts {
			names[i] = rowCountNames[c]
		}
		lines = append(lines, "count "+strings.Join(names, ", "))
	}
	switch a.do {
	case doReadMarker:
		lines = append(lines, "read the marker "+formatGuard(a.guard))
	case doAdmit:
		lines = append(lines, "admit: controls, breaker, throttle")
	case doMarkInProgress:
		lines = append(lines, "mark IN_PROGRESS "+formatGuard(a.guard))
	case doExecute:
		lines = append(lines, "execute "+formatGuard(a.guard))
	case doSettleBreaker:
		how := "success"
		if a.transient {
			how = "transient failure"
		}
		lines = append(lines, "settle the breaker: "+how)
	case doWrite:
		lines = append(lines, "write "+formatRowWrite(a.write)+" "+formatGuard(a.guard))
	case doFinish:
		switch {
		case a.finished && a.expiring:
			lines = append(lines, "finished; its marker expires soon: carry the bucket")
		case a.finished:
			lines = append(lines, "finished")
		default:
			lines = append(lines, "unfinished: "+a.err.Error())
		}
		switch a.line {
		case lineRerecorded:
			lines = append(lines, fmt.Sprintf("log: recorded again into %s at attempt %d", a.write.target.Window, a.write.row.Attempt))
		case lineDeadLettered:
			lines = append(lines, fmt.Sprintf("log: dead-lettered, attempts %d", a.write.dead.Transaction.Attempt))
		}
	default:
		lines = append(lines, fmt.Sprintf("action %d", a.do))
	}
	return strings.Join(lines, "\n")
}

func formatGuard(g rowGuard) string {
	switch {
	case g.orHeld:
		return fmt.Sprintf("(guard: the token, else e%d while it lasts)", g.held.Epoch)
	case g.sameEpoch:
		return fmt.Sprintf("(guard: the token at e%d)", g.epoch)
	default:
		return "(guard: the token)"
	}
}

func formatRowWrite(w rowWrite) string {
	switch w.kind {
	case writeCommitted:
		return "COMMITTED"
	case writeDay:
		return fmt.Sprintf("day %s (copy into %s within %v)", w.target.Window.Day, w.target.Window, w.within)
	case writeWindow:
		return fmt.Sprintf("window %s (copy within %v)", w.target.Window, w.within)
	case writeInstance:
		return fmt.Sprintf("instance %s in %s (copy within %v)", w.target.InstanceID, w.target.Window, w.within)
	case writeBucket:
		return fmt.Sprintf("bucket %d of %s in %s (copy within %v)", w.target.Bucket, w.target.InstanceID, w.target.Window, w.within)
	case writeTransaction:
		return fmt.Sprintf("row %s %s into %s (copy within %v)", w.row.ID, w.row.Copy(), w.target.Window, w.within)
	case writeFloor:
		return "floor " + w.floor.String()
	case writeDeadLetter:
		return fmt.Sprintf("dead letter: attempts %d, last status %d, last error %q, at %s",
			w.dead.Transaction.Attempt, w.dead.LastStatus, w.dead.LastError, w.dead.DeadAt.Format("15:04:05"))
	case writeDeadLettered:
		return "DEAD_LETTERED"
	}
	return fmt.Sprintf("write %d", w.kind)
}
