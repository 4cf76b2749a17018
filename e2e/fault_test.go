package e2e

import (
	"fmt"
	"time"

	"github.com/retryring/retryring/internal/downstream"
)

// faultKind says which executions a fault may leave in flight, to be executed again.
type faultKind int

const (
	// workerCrash: one worker died or froze at `at` (SIGKILL, SIGSTOP). An execution of that
	// worker under way then, or answered but not yet marked COMMITTED, may run again under
	// another worker (after its IN_PROGRESS marker expires) or under the worker itself.
	workerCrash faultKind = iota + 1
	// storeOutage: Cassandra was unavailable from `at` to `until`. An execution answered done
	// whose COMMITTED marker could not be written then runs again.
	storeOutage
	// leaseLapse: no coordinator could renew leases from `at` to `until` (quorum lost, or a
	// leader killed): an execution that ended as its worker's lease ran out may not have been
	// marked, since the guard refuses the marker write without time left.
	leaseLapse
)

func (k faultKind) String() string {
	switch k {
	case workerCrash:
		return "worker crash"
	case storeOutage:
		return "Cassandra outage"
	case leaseLapse:
		return "lease lapse"
	default:
		return fmt.Sprintf("fault(%d)", int(k))
	}
}

// inFlightSlack is how long before a fault an execution may have been answered done and still
// lack its COMMITTED marker: the marker write right after the answer, on a loaded machine.
const inFlightSlack = 3 * time.Second

// sentSlack is how long after a worker froze or died the stub may still start an execution it
// sent before: the request sat in a socket buffer, or the stub's handler was not scheduled yet.
const sentSlack = time.Second

// fault is something a scenario did that may leave executions in flight.
type fault struct {
	kind      faultKind
	worker    string // workerCrash only
	at, until time.Time
	// stopped is, for a storeOutage, when Cassandra was surely down (its process gone): `at` is
	// when the command that stops it began, and Cassandra may answer for a while after it.
	stopped time.Time
}

func (f fault) String() string {
	if f.kind == workerCrash {
		return fmt.Sprintf("%v of %s at %s", f.kind, f.worker, f.at.Format("15:04:05.000"))
	}
	return fmt.Sprintf("%v %s..%s", f.kind, f.at.Format("15:04:05.000"), f.until.Format("15:04:05.000"))
}

// covers reports whether f may have left the first done execution e in flight.
func (f fault) covers(e downstream.Execution) bool {
	switch f.kind {
	case workerCrash:
		return e.WorkerID == f.worker && e.Start.Before(f.at.Add(sentSlack)) && e.End.After(f.at.Add(-inFlightSlack))
	default:
		return e.Start.Before(f.until) && e.End.After(f.at.Add(-inFlightSlack))
	}
}

// capacity is the most executions f can leave in flight.
func (f fault) capacity(concurrency, workers int) int {
	if f.kind == workerCrash {
		return concurrency
	}
	return concurrency * workers
}

// addFault records a fault for the duplicate check.
func (s *scenario) addFault(f fault) {
	s.faults = append(s.faults, f)
	s.t.Logf("fault: %s", f)
}

// explain assigns each duplicate to the first fault that covers its first done execution and
// still has capacity; the rest are unexplained. workers is how many workers ever ran.
func explain(dups []downstream.Duplicate, faults []fault, concurrency, workers int) (map[string]string, []downstream.Duplicate) {
	explained := map[string]string{}
	used := make([]int, len(faults))
	var rest []downstream.Duplicate
	for _, d := range dups {
		first := d.First()
		ok := false
		for i, f := range faults {
			if used[i] < f.capacity(concurrency, workers) && f.covers(first) {
				used[i]++
				explained[d.TransactionID] = f.String()
				ok = true
				break
			}
		}
		if !ok {
			rest = append(rest, d)
		}
	}
	return explained, rest
}
