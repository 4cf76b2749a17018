package e2e

import (
	"fmt"
	"strings"
	"time"

	"github.com/retryring/retryring/internal/downstream"
	"github.com/retryring/retryring/window"
)

// maxClockOffset is the workers' --max-clock-offset (their default): Node-0 deletes a window
// once the clock is that far past its end.
const maxClockOffset = 2 * time.Second

// maxListed bounds the duplicates a check lists one by one.
const maxListed = 20

// rowCap bounds the rows a directory count reads: the checks need "empty", and a count for
// the message when it is not.
const rowCap = 10000

// directory is the state of the retry directory of the scenario's ring.
type directory struct {
	tier3, tier4, tier5 int
	windows, days       int
	// passedWindows and passedDays are tier-2 and tier-1 rows whose time has passed (Node-0's
	// time gate would let it delete them) at the moment of the read.
	passedWindows []string
	passedDays    []string
}

// drained is product.md's invariant 8.
func (d directory) drained() bool {
	return d.tier3 == 0 && d.tier4 == 0 && d.tier5 == 0 && len(d.passedWindows) == 0 && len(d.passedDays) == 0
}

func (d directory) String() string {
	return fmt.Sprintf("tier 5 rows %d, tier 4 rows %d, tier 3 rows %d, tier 2 windows %d (passed %v), tier 1 days %d (passed %v)",
		d.tier5, d.tier4, d.tier3, d.windows, d.passedWindows, d.days, d.passedDays)
}

// countRows counts up to rowCap rows of a table that belong to the scenario's region (two
// regions may share a keyspace: TestClusterTwoRegions); column must be a text column.
func (s *scenario) countRows(table, column string) (int, error) {
	it := s.db().Query(fmt.Sprintf("SELECT region, %s FROM %s LIMIT %d", column, table, rowCap)).PageSize(1000).Iter()
	n := 0
	var region, v string
	for it.Scan(&region, &v) {
		if region == s.c.Options().Ring.Region {
			n++
		}
	}
	return n, it.Close()
}

// readDirectory reads the five tiers.
func (s *scenario) readDirectory() (directory, error) {
	var d directory
	var err error
	if d.tier5, err = s.countRows("es_retry_transactions_by_instance", "transaction_id"); err != nil {
		return d, err
	}
	if d.tier4, err = s.countRows("es_buckets_by_instance", "instance_id"); err != nil {
		return d, err
	}
	if d.tier3, err = s.countRows("es_instances_by_retry_window", "instance_id"); err != nil {
		return d, err
	}
	L := s.c.Options().WindowMinutes
	now := time.Now()
	region := s.c.Options().Ring.Region
	it := s.db().Query("SELECT region, date_of_year, minute_of_day FROM es_retry_windows_by_day").Iter()
	var day time.Time
	var minute int
	var r string
	for it.Scan(&r, &day, &minute) {
		if r != region {
			continue
		}
		d.windows++
		w, werr := window.New(window.DateOf(day), minute, L)
		if werr != nil {
			d.passedWindows = append(d.passedWindows, fmt.Sprintf("invalid %v/%d: %v", day, minute, werr))
			continue
		}
		if window.DeletableWindow(w, now, maxClockOffset) {
			d.passedWindows = append(d.passedWindows, w.String())
		}
	}
	if err := it.Close(); err != nil {
		return d, err
	}
	it = s.db().Query("SELECT region, date_of_year FROM es_days_by_year").Iter()
	for it.Scan(&r, &day) {
		if r != region {
			continue
		}
		d.days++
		if dd := window.DateOf(day); window.DeletableDay(dd, now, maxClockOffset) {
			d.passedDays = append(d.passedDays, dd.String())
		}
	}
	return d, it.Close()
}

// deadLetter is one row of es_dead_letters.
type deadLetter struct {
	status  int
	attempt int
	err     string
	worker  string
}

// deadLetters reads es_dead_letters by transaction id.
func (s *scenario) deadLetters() (map[string]deadLetter, error) {
	out := map[string]deadLetter{}
	it := s.db().Query("SELECT transaction_id, last_status, attempt, last_error, worker_id FROM es_dead_letters").PageSize(1000).Iter()
	var id string
	var dl deadLetter
	for it.Scan(&id, &dl.status, &dl.attempt, &dl.err, &dl.worker) {
		out[id] = dl
	}
	return out, it.Close()
}

// accounting is where every recorded transaction ended up.
type accounting struct {
	recorded, done, deadLettered int
	lost                         []string // neither done nor dead-lettered
	both                         []string // done and dead-lettered
	// wrongDead are dead letters of transactions the stub never answered permanently.
	wrongDead []string
	// permanentDone are transactions the stub always refuses permanently that count as done.
	permanentDone []string
}

func (a accounting) String() string {
	return fmt.Sprintf("recorded %d: done %d, dead-lettered %d, lost %d, done and dead-lettered %d",
		a.recorded, a.done, a.deadLettered, len(a.lost), len(a.both))
}

// account compares what was recorded with what the stub did and the dead letters.
func (s *scenario) account() (accounting, error) {
	dead, err := s.deadLetters()
	if err != nil {
		return accounting{}, err
	}
	done := s.ds.DoneIDs()
	var a accounting
	for _, id := range s.expected() {
		a.recorded++
		dl, isDead := dead[id]
		switch {
		case done[id] && isDead:
			a.both = append(a.both, id)
		case done[id]:
			a.done++
		case isDead:
			a.deadLettered++
		default:
			a.lost = append(a.lost, id)
		}
		if isDead && !s.ds.IsPermanent(id) && dl.attempt+1 < 10 {
			a.wrongDead = append(a.wrongDead, id)
		}
		if done[id] && s.ds.IsPermanent(id) {
			a.permanentDone = append(a.permanentDone, id)
		}
	}
	return a, nil
}

// waitDrained waits until every recorded transaction is done or dead-lettered and the
// directory is as invariant 8 says, and returns when that was first seen.
func (s *scenario) waitDrained(bound time.Duration) time.Time {
	s.t.Helper()
	deadline := time.Now().Add(bound)
	var a accounting
	var d directory
	var err error
	for {
		a, err = s.account()
		if err == nil && len(a.lost) == 0 {
			d, err = s.readDirectory()
			if err == nil && d.drained() {
				at := time.Now()
				s.t.Logf("drained: %s; %s", a, d)
				return at
			}
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	d, derr := s.readDirectory()
	var lostInfo []string
	for _, id := range a.lost[:min(len(a.lost), 5)] {
		lostInfo = append(lostInfo, fmt.Sprintf("%s: %d executions %v", id, len(s.ds.ExecutionsOf(id)), statuses(s.ds.ExecutionsOf(id))))
	}
	s.t.Fatalf("not drained after %v (last error %v): %s; first lost: %s; directory: %s (read error %v); stub: %+v",
		bound, err, a, strings.Join(lostInfo, "; "), d, derr, s.ds.Summary())
	return time.Time{}
}

func statuses(es []downstream.Execution) []int {
	out := make([]int, len(es))
	for i, e := range es {
		out[i] = e.Status
	}
	return out
}

// verdict is what the end-of-scenario checks found.
type verdict struct {
	acc         accounting
	executions  int
	duplicates  []downstream.Duplicate
	refusals    []downstream.Duplicate // steps refused for good more than once
	explained   map[string]string      // transaction → the fault that explains its second execution
	unexplained []downstream.Duplicate
}

// check runs the checks every scenario ends with (after waitDrained): nothing lost, nothing both
// done and dead-lettered, dead letters exactly the permanent failures, every duplicate explained
// by a fault and within what that fault could leave in flight, no interleaving, no contract
// violation.
func (s *scenario) check() verdict {
	s.t.Helper()
	a, err := s.account()
	if err != nil {
		s.t.Fatalf("accounting: %v", err)
	}
	v := verdict{acc: a, executions: len(s.ds.Executions()), duplicates: s.ds.Duplicates()}
	if len(a.lost) > 0 {
		s.t.Errorf("lost %d transactions, first %v", len(a.lost), a.lost[:min(5, len(a.lost))])
	}
	if len(a.both) > 0 {
		s.t.Errorf("%d transactions both done and dead-lettered, first %v", len(a.both), a.both[:min(5, len(a.both))])
	}
	if len(a.wrongDead) > 0 {
		s.t.Errorf("%d transactions dead-lettered that the stub never refused permanently, first %v", len(a.wrongDead), a.wrongDead[:min(5, len(a.wrongDead))])
	}
	if len(a.permanentDone) > 0 {
		s.t.Errorf("%d permanently failing transactions counted as done, first %v", len(a.permanentDone), a.permanentDone[:min(5, len(a.permanentDone))])
	}
	// A step refused for good is dead-lettered and marked DEAD_LETTERED: calling it again needs a
	// fault to explain it, like a done step executed twice. Both draw on the same faults.
	v.refusals = downstream.RepeatedRefusals(s.ds.Executions())
	v.explained, v.unexplained = explain(append(append([]downstream.Duplicate(nil), v.duplicates...), v.refusals...),
		s.faults, s.c.Options().Concurrency, len(s.c.Workers()))
	for i, d := range v.unexplained {
		if i == maxListed {
			s.t.Errorf("... and %d more executed twice with no fault to explain it", len(v.unexplained)-maxListed)
			break
		}
		s.t.Errorf("executed twice with no fault to explain it: %s", d)
	}
	listed := 0
	for _, d := range v.duplicates {
		if why, ok := v.explained[d.TransactionID]; ok && listed < maxListed {
			s.t.Logf("executed twice, explained by %s: %s", why, d)
			listed++
		}
	}
	for _, iv := range s.ds.Interleavings() {
		s.t.Errorf("exclusivity: %s", iv)
	}
	s.checkBounds()
	for _, vi := range s.ds.Violations() {
		s.t.Errorf("executor contract: %s: %s", vi.Reason, vi.Body)
	}
	sum := s.ds.Summary()
	s.t.Logf("verdict: %s; %d executions (%v), executed twice %d (explained %d), refused for good more than once %d, by worker %v",
		a, v.executions, sum.ByStatus, len(v.duplicates), len(v.explained), len(v.refusals), sum.ByWorker)
	return v
}
