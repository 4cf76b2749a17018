package demo

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Summary is the outcome of a run.
type Summary struct {
	Keyspace string
	// Instances recorded the burst; Backdate was its --backdate (0: W+1).
	Instances int
	Backdate  time.Duration
	// RecordTime is how long the burst took to record.
	RecordTime time.Duration

	// Recorded, Done, DeadLettered and Lost come from the burst's ids, the downstream's record
	// of done answers and es_dead_letters: Lost = Recorded − Done − DeadLettered.
	Recorded, Done, DeadLettered, Lost int
	// DoneAndDead counts transactions both done and dead-lettered (must be 0).
	DoneAndDead int
	// ExecutedTwice counts transactions the downstream answered done more than once.
	ExecutedTwice int
	// Killed is the worker killed with SIGKILL ("" when no worker was killed); InFlightAtKill
	// the executions the downstream was working on for it at that moment; Concurrency its
	// bound on rows in flight, which bounds ExecutedTwice.
	Killed         string
	InFlightAtKill int
	Concurrency    int
	// Interleavings counts executions of one instance by two workers at overlapping times.
	Interleavings int
	// Executions counts every execution; ByStatus splits them by answer (0 aborted, -1 under way).
	Executions int
	ByStatus   map[int]int
	// Retried counts transactions answered transiently at least once (each was recorded again
	// into a later window); TransientAnswers counts those answers.
	Retried, TransientAnswers int
	// Backoff, as the downstream saw it (invariant 9): OutageCalls are the calls it answered 503,
	// over OutageFor from the first of them until it recovered (0: it never refused a call);
	// MostCalls the most calls one step received (MostCallsKey which);
	// RepeatedAttempts calls repeating an attempt already answered transiently, EarlyCalls calls
	// sooner than their backoff allows (both must be 0).
	OutageCalls, MostCalls, RepeatedAttempts, EarlyCalls int
	MostCallsKey                                         string
	OutageFor                                            time.Duration
	// RepeatedAfterKill counts the repeated attempts whose earlier call was the killed
	// worker's: it died between a row's copy and its floor (or with the call's outcome unwritten),
	// the one gap invariant 9 allows.
	RepeatedAfterKill int
	// PausedFor is how long `ctl pause` held the ring (PauseShown: the pause and the resume both
	// went through); LateUnderPause the executions that reached the downstream later than one
	// renewal after the pause and before the resume (must be 0).
	PausedFor      time.Duration
	LateUnderPause int
	PauseShown     bool
	// BreakerRefused counts the executions the workers' circuit breakers held back while the
	// downstream failed (a lower bound: a restarted worker counts from its restart); BreakerKnown
	// is false when no worker's metrics could be read.
	BreakerRefused int
	BreakerKnown   bool
	// Replayed counts the dead letters replayed once the rest drained, ReplayedDone those of
	// them done since; ReplayTook how long from the replay until all were done.
	Replayed, ReplayedDone int
	ReplayTook             time.Duration

	// Drained reports whether every recorded transaction reached an end; DrainTime is from
	// the first window opening until then, AfterLastFault from the last fault until then.
	Drained        bool
	DrainTime      time.Duration
	AfterLastFault time.Duration
	Interrupted    bool
	// Kept reports whether the keyspace outlives the run (--keep).
	Kept bool

	Windows []WindowRow
	// Leftover is the directory at the end; LeftoverErr why it could not be read.
	Leftover    Leftover
	LeftoverErr error
	Events      []Event
}

// newSummary fills the counts of a summary from a ledger.
func newSummary(l Ledger) Summary {
	s := Summary{
		Recorded: l.Recorded, Done: l.Done, DeadLettered: l.DeadLettered, Lost: l.Lost,
		DoneAndDead: l.DoneAndDead, ExecutedTwice: l.ExecutedTwice, Interleavings: l.Interleavings,
		Executions: l.Executions, ByStatus: l.ByStatus, Windows: l.Windows,
	}
	s.Retried, s.TransientAnswers = l.FailedTransiently, l.TransientAnswers
	return s
}

// Lines renders the summary.
func (s Summary) Lines() []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	path := "W+1: each failure into the window after the one its clock was in"
	if s.Backdate > 0 {
		path = fmt.Sprintf("--backdate %v: into a past window, through the late-write protocol", s.Backdate)
	}
	add("summary")
	add("  recorded       %9s   across %d instances in %v (%s)", num(s.Recorded), s.Instances, s.RecordTime.Round(time.Millisecond), path)
	add("  done           %9s   answered 2xx/409 by the downstream", num(s.Done))
	add("  dead-lettered  %9s   in es_dead_letters (permanent 4xx answers, or out of attempts) and not replayed and done since", num(s.DeadLettered))
	if s.Interrupted {
		add("  unfinished     %9s   recorded − done − dead-lettered when the run was interrupted (still in the directory%s)",
			num(s.Lost), map[bool]string{true: ", kept with --keep", false: ", dropped with the keyspace"}[s.Kept])
	} else {
		add("  lost           %9s   recorded − done − dead-lettered%s", num(s.Lost), lostNote(s))
	}
	if s.Replayed > 0 {
		took := "not all within " + replayWait.String()
		if s.ReplayTook > 0 {
			took = "all done " + s.ReplayTook.Round(time.Second).String() + " after the replay"
		}
		add("  replayed       %9s   dead letters replayed once the downstream was fixed (deadletters replay --id %s): %s done, %s",
			num(s.Replayed), replayID, num(s.ReplayedDone), took)
	}
	add("  executed twice %9s   %s", num(s.ExecutedTwice), twiceNote(s))
	add("  interleaved    %9s   instances executed by two workers at overlapping times or on a stale lease (must be 0)", num(s.Interleavings))
	if s.DoneAndDead > 0 {
		add("  WARNING: %s transactions are both done and dead-lettered", num(s.DoneAndDead))
	}
	add("  retried        %9s   transactions answered 503 at least once (%s answers in all): each went to a later window",
		num(s.Retried), num(s.TransientAnswers))
	add("  executions     %9s   %s", num(s.Executions), statuses(s.ByStatus))
	add("  outage calls   %9s   calls the downstream answered 503%s (each failure once, then not before its backoff)", num(s.OutageCalls), outageNote(s))
	if s.PauseShown {
		add("  paused         %9v   by ctl pause / ctl resume: %s executions started later than one renewal into the pause (must be 0)",
			s.PausedFor.Round(time.Second), num(s.LateUnderPause))
	}
	if s.BreakerKnown {
		add("  breaker held   %9s   row admissions refused by open circuit breakers while the downstream failed (rows kept, no attempt used; a row held on several passes counts each time)", num(s.BreakerRefused))
	}
	add("  calls per step %9s   at most (%s): one per attempt", num(s.MostCalls), orNone(s.MostCallsKey))
	add("  early calls    %9s   calls sooner than the backoff allows (must be 0)", num(s.EarlyCalls))
	add("  repeated       %9s   calls repeating an attempt already answered 503: %s", num(s.RepeatedAttempts), repeatedNote(s))
	switch {
	case s.Drained:
		after := ""
		if s.AfterLastFault > 0 {
			after = fmt.Sprintf(", %v after the last fault", s.AfterLastFault.Round(time.Second))
		}
		add("  time to drain  %9v   from the first window opening until every transaction was done or dead-lettered%s",
			s.DrainTime.Round(time.Second), after)
	case s.Interrupted:
		add("  time to drain  %9s   interrupted before the drain ended", "-")
	default:
		add("  time to drain  %9s   NOT drained within the timeout", "-")
	}
	if s.LeftoverErr != nil {
		add("  directory      could not be read: %v", s.LeftoverErr)
	} else {
		lo := s.Leftover
		add("  directory      %s rows, %s bucket rows, %s instance markers left; %s rows wait in windows not open yet; passed windows %d, passed days %d",
			num(lo.Rows), num(lo.Buckets), num(lo.Instances), num(lo.RowsNotOpen), lo.PassedWindows, lo.PassedDays)
		if lo.RowsNotOpen > 0 && s.Drained {
			add("                 (copies of steps already finished: when their window opens a worker skips each committed one by its marker and dead-letters a refused one again, then Node-0 deletes the window)")
		}
	}
	if len(s.Windows) > 0 {
		add("windows")
		for _, r := range s.Windows {
			add("  %s: recorded %s, done %s, retried %s, dead-lettered %s, pending %s",
				windowName(r), num(r.Recorded), num(r.Done), num(r.Retried), num(r.DeadLettered), num(r.Pending))
		}
	}
	return out
}

// outageNote says how long the outage lasted: it began with the first refused call, whenever the
// workers came, and ended once some were refused and the configured time had passed.
func outageNote(s Summary) string {
	if s.OutageFor <= 0 {
		return ""
	}
	return fmt.Sprintf(" during its %v outage, counted from the first refused call", s.OutageFor.Round(100*time.Millisecond))
}

func lostNote(s Summary) string {
	if s.Lost == 0 {
		return ""
	}
	return " — NOT done and NOT dead-lettered"
}

// twiceNote explains the executions twice: with graceful operations there are none; after a
// kill -9 at most the rows the killed worker had in flight, because a step it executed but
// had not yet marked COMMITTED is executed again by the next owner of its token.
func twiceNote(s Summary) string {
	switch {
	case s.ExecutedTwice == 0 && s.Killed == "":
		return "none (no worker was killed; graceful operations never execute twice)"
	case s.Killed == "":
		return "UNEXPECTED: no worker was killed"
	case s.ExecutedTwice == 0:
		return fmt.Sprintf("none this time; after a kill -9 it may be up to the rows the killed worker had in flight (%s: ≤ --worker-concurrency %d, %d at the downstream at that instant), "+
			"since a step executed but not yet marked COMMITTED is executed again by the next owner of its token", s.Killed, s.Concurrency, s.InFlightAtKill)
	case s.ExecutedTwice <= s.Concurrency:
		return fmt.Sprintf("at most the rows %s had in flight when it was killed (≤ --worker-concurrency %d; %d at the downstream at that instant): "+
			"a step it executed but had not marked COMMITTED is executed again by the next owner of its token, and the Idempotency-Key makes the repeat a 409",
			s.Killed, s.Concurrency, s.InFlightAtKill)
	default:
		return fmt.Sprintf("UNEXPECTED: more than the %d rows %s could have had in flight when it was killed", s.Concurrency, s.Killed)
	}
}

func statuses(by map[int]int) string {
	keys := make([]int, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	var parts []string
	for _, k := range keys {
		name := fmt.Sprint(k)
		switch k {
		case 0:
			name = "aborted"
		case -1:
			name = "under way"
		}
		parts = append(parts, fmt.Sprintf("%s %s", name, num(by[k])))
	}
	return strings.Join(parts, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// repeatedNote explains repeated attempts: none without a crash; after a kill -9, the rows the
// killed worker had answered but not yet settled (its copy written, its floor not) run once more.
func repeatedNote(s Summary) string {
	switch {
	case s.RepeatedAttempts == 0:
		return "none (a kept bucket calls nobody again for a row it handled)"
	case s.RepeatedAttempts == s.RepeatedAfterKill:
		return fmt.Sprintf("all after calls of %s, killed before it settled them (copy written, floor not): the one gap invariant 9 allows, at most once per row", s.Killed)
	default:
		return fmt.Sprintf("UNEXPECTED: %d not explained by the kill of %s", s.RepeatedAttempts-s.RepeatedAfterKill, orNone(s.Killed))
	}
}
