package demo

import (
	"net/http"
	"sort"
	"time"

	"github.com/retryring/retryring/internal/downstream"
	"github.com/retryring/retryring/window"
)

// WindowRow is one window of the live table: what was recorded into it and what became of it.
// Recorded = Pending + Done + Retried + DeadLettered.
type WindowRow struct {
	Window window.Window
	// Recorded counts the transactions written into the window: the burst's own rows, the
	// copies workers recorded again into it (counted in the directory before it opened), and
	// any transaction executed from it.
	Recorded int
	// Done: executed from this window and answered done (2xx or 409), or skipped there because
	// an earlier execution had already committed the step.
	Done int
	// Retried: the last execution from this window failed transiently, so the worker recorded
	// the transaction again into a later window.
	Retried int
	// DeadLettered: given up on from this window (es_dead_letters names the window).
	DeadLettered int
	// Pending: not executed to an outcome yet.
	Pending int
	// Opens is when workers start reading the window (its start plus max_clock_offset).
	Opens time.Time
}

// Open reports whether the window was readable at now.
func (r WindowRow) Open(now time.Time) bool { return !now.Before(r.Opens) }

// deadLetter is where a dead letter came from.
type deadLetter struct {
	Window     window.Window
	LastStatus int
	Attempts   int
	Replayed   bool // an operator replayed it (deadletters replay)
}

// ledgerInput is everything the accounting reads, gathered at one moment.
type ledgerInput struct {
	Now    time.Time
	Offset time.Duration // max_clock_offset: a window opens this long after its start
	Length int           // window length L in minutes
	// Own lists, per window, the transactions the burst recorded into it.
	Own map[window.Window][]string
	// Seen lists, per window, the transactions found in the directory while it was not yet open
	// (the copies workers recorded again).
	Seen map[window.Window]map[string]bool
	// Execs is the downstream's record.
	Execs []downstream.Execution
	// Dead is es_dead_letters by transaction id.
	Dead map[string]deadLetter
}

// Ledger is the accounting of a run at one moment.
type Ledger struct {
	Windows []WindowRow
	// Recorded is the number of transactions of the burst; Done and DeadLettered those of them
	// answered done at least once or dead-lettered; Lost those neither (yet).
	Recorded, Done, DeadLettered, Lost int
	// DoneAndDead counts transactions both done and dead-lettered, their dead letter not
	// replayed: a contradiction, reported. Replayed counts dead letters replayed, ReplayedDone
	// those of them done since (counted in Done, not in DeadLettered).
	DoneAndDead, Replayed, ReplayedDone int
	// ExecutedTwice counts transactions answered done more than once.
	ExecutedTwice int
	// FailedTransiently counts transactions answered transiently at least once (each was
	// recorded again into a later window); TransientAnswers counts those answers.
	FailedTransiently, TransientAnswers int
	// Executions counts every execution; ByStatus splits them (0 aborted, -1 under way).
	Executions int
	ByStatus   map[int]int
	// Interleavings counts executions of one instance by two workers at overlapping times (or
	// under a stale lease), which exclusivity forbids.
	Interleavings int
}

// Finished is Done + DeadLettered: the transactions of the burst that reached an end.
func (l Ledger) Finished() int { return l.Done + l.DeadLettered }

// Fraction is the part of the burst finished, in [0, 1].
func (l Ledger) Fraction() float64 {
	if l.Recorded == 0 {
		return 0
	}
	return float64(l.Finished()) / float64(l.Recorded)
}

// outcome of an execution, from the worker's point of view.
type outcome int

const (
	outNone outcome = iota
	outDone
	outTransient
	outPermanent
)

// classify maps a stub answer to what the worker makes of it (product.md, "Executor").
func classify(e downstream.Execution) outcome {
	switch s := e.Status; {
	case e.Running() || e.Aborted():
		return outNone // the worker timed out or went away: a transient failure, or nothing yet
	case e.Done():
		return outDone
	case s >= 500, s == http.StatusRequestTimeout, s == http.StatusTooEarly, s == http.StatusTooManyRequests:
		return outTransient
	default:
		return outPermanent
	}
}

type txWindow struct {
	tx string
	w  window.Window
}

// account computes the ledger. It is pure: the same input gives the same ledger.
func account(in ledgerInput) Ledger {
	l := Ledger{ByStatus: map[int]int{}}
	rows, own := knownRows(in)
	ex := l.tallyExecutions(in, rows)
	for w, ids := range rows {
		l.Windows = append(l.Windows, windowRow(w, ids, in, ex))
	}
	sort.Slice(l.Windows, func(i, j int) bool { return l.Windows[i].Window.Compare(l.Windows[j].Window) < 0 })
	for id := range own {
		l.tallyOwn(id, in.Dead, ex.doneCount[id] > 0)
	}
	return l
}

// windowRows are the transactions known in each window: recorded there by this run, seen in the
// tables, or executed from there.
type windowRows map[window.Window]map[string]bool

func (rows windowRows) add(w window.Window, id string) {
	if rows[w] == nil {
		rows[w] = map[string]bool{}
	}
	rows[w][id] = true
}

// knownRows gathers the rows this run recorded (own, also returned as a set) and those seen in
// the tables.
func knownRows(in ledgerInput) (windowRows, map[string]bool) {
	rows := windowRows{}
	own := map[string]bool{}
	for w, ids := range in.Own {
		for _, id := range ids {
			rows.add(w, id)
			own[id] = true
		}
	}
	for w, ids := range in.Seen {
		for id := range ids {
			rows.add(w, id)
		}
	}
	return rows, own
}

// executions is what the stub's log says of each transaction.
type executions struct {
	// last is the last outcome of each transaction in each window, in arrival order.
	last map[txWindow]outcome
	// doneCount counts the answers done of each transaction, in any window.
	doneCount map[string]int
}

// tallyExecutions counts the executions into l (by status, transient answers, executed twice,
// interleavings), adds the window of each to rows, and returns the outcomes per transaction.
func (l *Ledger) tallyExecutions(in ledgerInput, rows windowRows) executions {
	ex := executions{last: map[txWindow]outcome{}, doneCount: map[string]int{}}
	transient := map[string]bool{}
	for _, e := range in.Execs {
		l.Executions++
		status := e.Status
		if e.Running() {
			status = -1
		}
		l.ByStatus[status]++
		w, err := execWindow(e, in.Length)
		if err != nil {
			continue
		}
		rows.add(w, e.TransactionID)
		o := classify(e)
		if o != outNone {
			ex.last[txWindow{e.TransactionID, w}] = o
		}
		if o == outTransient {
			l.TransientAnswers++
			transient[e.TransactionID] = true
		}
		if e.Done() {
			ex.doneCount[e.TransactionID]++
		}
	}
	for _, n := range ex.doneCount {
		if n > 1 {
			l.ExecutedTwice++
		}
	}
	l.FailedTransiently = len(transient)
	l.Interleavings = len(downstream.Interleavings(in.Execs))
	return ex
}

// windowRow is the row of window w, whose transactions are ids: each counted by the fate of its
// copy in that window.
func windowRow(w window.Window, ids map[string]bool, in ledgerInput, ex executions) WindowRow {
	r := WindowRow{Window: w, Recorded: len(ids), Opens: w.Start().Add(in.Offset)}
	for id := range ids {
		if d, ok := in.Dead[id]; ok && d.Window == w {
			r.DeadLettered++
			continue
		}
		_, dead := in.Dead[id]
		switch ex.last[txWindow{id, w}] {
		case outDone:
			r.Done++
		case outTransient:
			r.Retried++
		case outNone:
			switch {
			case ex.doneCount[id] > 0:
				// Committed from another window (or earlier): the worker skips this copy.
				r.Done++
			case dead:
				// Given up on from another window: this copy is refused again when its
				// window opens (a dead letter writes no marker), so its fate is known.
				r.DeadLettered++
			default:
				r.Pending++
			}
		default:
			// A permanent answer. Its dead letter may name another window: the table keeps
			// one row per transaction and day, and a copy refused again later overwrites it.
			if dead {
				r.DeadLettered++
			} else {
				r.Pending++ // the dead letter is not written yet
			}
		}
	}
	return r
}

// tallyOwn counts one transaction this run recorded by its fate: done (after a replay, or while
// also dead-lettered), dead-lettered, or lost.
func (l *Ledger) tallyOwn(id string, deadLetters map[string]deadLetter, done bool) {
	l.Recorded++
	d, dead := deadLetters[id]
	if dead && d.Replayed {
		l.Replayed++
	}
	switch {
	case done && dead && d.Replayed:
		l.ReplayedDone++
		l.Done++
	case done && dead:
		l.DoneAndDead++
		l.Done++
	case done:
		l.Done++
	case dead:
		l.DeadLettered++
	default:
		l.Lost++
	}
}

// execWindow is the window an execution's row was found in.
func execWindow(e downstream.Execution, length int) (window.Window, error) {
	d, err := window.ParseDate(e.WindowDate)
	if err != nil {
		return window.Window{}, err
	}
	return window.New(d, e.WindowMinute, length)
}
