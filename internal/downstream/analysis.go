package downstream

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Duplicate is a transaction executed twice or more: answered done more than once
// (Duplicates), or refused for good more than once (RepeatedRefusals).
type Duplicate struct {
	TransactionID string
	// Execs are those executions, in arrival order (at least two).
	Execs []Execution
}

// First is the first of them.
func (d Duplicate) First() Execution { return d.Execs[0] }

// String names the workers, epochs and times of every done execution.
func (d Duplicate) String() string {
	parts := make([]string, len(d.Execs))
	for i, e := range d.Execs {
		parts[i] = fmt.Sprintf("%s@epoch%d [%s..%s] %d", e.WorkerID, e.LeaseEpoch,
			e.Start.Format("15:04:05.000"), e.End.Format("15:04:05.000"), e.Status)
	}
	return d.TransactionID + ": " + strings.Join(parts, ", ")
}

// Duplicates returns the transactions of execs answered done more than once, sorted by the start
// of their first done execution.
func Duplicates(execs []Execution) []Duplicate {
	out := repeated(execs, Execution.Done)
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].First(), out[j].First()
		if !a.Start.Equal(b.Start) {
			return a.Start.Before(b.Start)
		}
		return a.Seq < b.Seq
	})
	return out
}

// RepeatedRefusals returns the transactions of execs refused for good (a permanent answer: a
// 4xx other than 408, 409, 425 and 429) more than once: a step given up on and then called
// again, which its DEAD_LETTERED marker should prevent unless a fault cut in between. Sorted by
// the arrival of their first refusal.
func RepeatedRefusals(execs []Execution) []Duplicate {
	out := repeated(execs, func(e Execution) bool { return permanentStatus(e.Status) })
	sort.Slice(out, func(i, j int) bool { return out[i].First().Seq < out[j].First().Seq })
	return out
}

// repeated groups the executions that count by transaction and keeps the transactions with two
// or more, each in arrival order.
func repeated(execs []Execution, counts func(Execution) bool) []Duplicate {
	byTx := map[string][]Execution{}
	for _, e := range execs {
		if counts(e) {
			byTx[e.TransactionID] = append(byTx[e.TransactionID], e)
		}
	}
	var out []Duplicate
	for id, es := range byTx {
		if len(es) > 1 {
			sort.Slice(es, func(i, j int) bool { return es[i].Seq < es[j].Seq })
			out = append(out, Duplicate{TransactionID: id, Execs: es})
		}
	}
	return out
}

// permanentStatus reports whether an HTTP status is a permanent refusal, as the executor
// classifies it.
func permanentStatus(status int) bool {
	switch status {
	case 408, 409, 425, 429:
		return false
	}
	return status >= 400 && status < 500
}

// Interleaving kinds.
const (
	// KindOverlap: two workers executed one instance at overlapping times.
	KindOverlap = "overlap"
	// KindStaleEpoch: a worker executed an instance again, after another worker had executed
	// it, under a lease epoch no newer than one it had used before that other worker: it acted on
	// a lease that no longer gave it the instance.
	KindStaleEpoch = "stale_epoch"
)

// Interleaving is an instance executed by two workers in a way exclusivity forbids.
type Interleaving struct {
	InstanceID string
	Kind       string
	// Earlier and Later are the two executions: Later started after Earlier.
	Earlier, Later Execution
}

func (iv Interleaving) String() string {
	f := func(e Execution) string {
		end := "running"
		if !e.End.IsZero() {
			end = e.End.Format("15:04:05.000")
		}
		return fmt.Sprintf("%s@epoch%d tx %s [%s..%s]", e.WorkerID, e.LeaseEpoch, e.TransactionID, e.Start.Format("15:04:05.000"), end)
	}
	return fmt.Sprintf("instance %s %s: %s then %s", iv.InstanceID, iv.Kind, f(iv.Earlier), f(iv.Later))
}

// maxReportsPerInstance bounds the interleavings reported for one instance: one bad handover
// would otherwise be reported once per execution that followed it.
const maxReportsPerInstance = 5

// Interleavings checks, for every instance, that no two workers executed it at overlapping times
// ([Start, End] intervals; an execution still under way counts as running for ever) and that no
// worker came back to it under a stale epoch. It returns every violation, at most a few per
// instance, sorted by instance.
func Interleavings(execs []Execution) []Interleaving {
	byInstance := map[string][]Execution{}
	for _, e := range execs {
		byInstance[e.InstanceID] = append(byInstance[e.InstanceID], e)
	}
	instances := make([]string, 0, len(byInstance))
	for id := range byInstance {
		instances = append(instances, id)
	}
	sort.Strings(instances)
	var out []Interleaving
	for _, id := range instances {
		out = append(out, instanceViolations(id, byInstance[id])...)
	}
	return out
}

func instanceViolations(instance string, es []Execution) []Interleaving {
	sort.Slice(es, func(i, j int) bool {
		if !es[i].Start.Equal(es[j].Start) {
			return es[i].Start.Before(es[j].Start)
		}
		return es[i].Seq < es[j].Seq
	})
	var out []Interleaving
	report := func(kind string, a, b Execution) {
		if len(out) < maxReportsPerInstance {
			out = append(out, Interleaving{InstanceID: instance, Kind: kind, Earlier: a, Later: b})
		}
	}
	// latest[w] is w's execution that ends last so far; maxEpoch[w] the highest epoch w used;
	// handedOver[w] the highest epoch w had used when another worker last took the instance.
	latest := map[string]Execution{}
	maxEpoch := map[string]uint64{}
	handedOver := map[string]uint64{}
	owner := ""
	for _, e := range es {
		for w, l := range latest {
			if w != e.WorkerID && endsAfter(l, e.Start) {
				report(KindOverlap, l, e)
			}
		}
		if owner != "" && owner != e.WorkerID {
			handedOver[owner] = max(handedOver[owner], maxEpoch[owner])
			if prev, ok := handedOver[e.WorkerID]; ok && e.LeaseEpoch <= prev {
				report(KindStaleEpoch, latest[e.WorkerID], e)
			}
		}
		owner = e.WorkerID
		if l, ok := latest[e.WorkerID]; !ok || endsLater(e, l) {
			latest[e.WorkerID] = e
		}
		maxEpoch[e.WorkerID] = max(maxEpoch[e.WorkerID], e.LeaseEpoch)
	}
	return out
}

// endsAfter reports whether e was still running after t (a zero End is still running).
func endsAfter(e Execution, t time.Time) bool { return e.End.IsZero() || e.End.After(t) }

// endsLater reports whether a ends after b.
func endsLater(a, b Execution) bool {
	switch {
	case a.End.IsZero():
		return true
	case b.End.IsZero():
		return false
	default:
		return a.End.After(b.End)
	}
}

// Summary counts a record of executions.
type Summary struct {
	Executions int `json:"executions"`
	// ByStatus counts executions by answer; 0 is aborted, -1 still under way.
	ByStatus map[int]int `json:"by_status"`
	// Transactions is the number of distinct transactions executed at all; Done those answered
	// done at least once; ExecutedTwice those answered done more than once.
	Transactions  int `json:"transactions"`
	Done          int `json:"done"`
	ExecutedTwice int `json:"executed_twice"`
	// ByWorker counts executions per worker id.
	ByWorker map[string]int `json:"by_worker"`
	// Interleavings is len(Interleavings(...)); Violations the requests that broke the contract.
	Interleavings int `json:"interleavings"`
	Violations    int `json:"violations"`
}

// Summarize counts execs.
func Summarize(execs []Execution) Summary {
	s := Summary{Executions: len(execs), ByStatus: map[int]int{}, ByWorker: map[string]int{}}
	tx := map[string]int{} // transaction → done answers
	for _, e := range execs {
		status := e.Status
		if e.End.IsZero() {
			status = -1
		}
		s.ByStatus[status]++
		s.ByWorker[e.WorkerID]++
		n := tx[e.TransactionID]
		if e.Done() {
			n++
		}
		tx[e.TransactionID] = n
	}
	s.Transactions = len(tx)
	for _, n := range tx {
		if n > 0 {
			s.Done++
		}
		if n > 1 {
			s.ExecutedTwice++
		}
	}
	s.Interleavings = len(Interleavings(execs))
	return s
}
