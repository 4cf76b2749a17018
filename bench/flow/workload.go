package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/recorder"
	"github.com/retryring/retryring/window"
)

// layout is how the pending rows sit on the ring: Rows[m] lists, for the m-th member (in worker
// id order), the sizes of the instances whose token falls in that member's ranges. Where the rows
// sit decides which worker executes them, and so which worker's share of the ring's rate they use.
type layout struct {
	name string
	rows [][]int
}

func (l layout) total() int {
	n := 0
	for _, m := range l.rows {
		for _, r := range m {
			n += r
		}
	}
	return n
}

func (l layout) String() string {
	out := l.name + ":"
	for i, m := range l.rows {
		out += fmt.Sprintf(" member %d %v", i+1, m)
	}
	return out
}

// unequal puts one instance of big rows and two of small on the first member, two of small on
// each other: after the small ones are done only the first member has work.
func unequal(members, big, small int) layout {
	l := layout{name: "unequal", rows: make([][]int, members)}
	for m := range l.rows {
		l.rows[m] = []int{small, small}
	}
	l.rows[0] = append([]int{big}, l.rows[0]...)
	return l
}

// equal spreads the same total over perMember instances per member, of one size.
func equal(members, total, perMember int) layout {
	l := layout{name: "equal", rows: make([][]int, members)}
	each := total / (members * perMember)
	for m := range l.rows {
		for range perMember {
			l.rows[m] = append(l.rows[m], each)
		}
	}
	return l
}

// placed is an instance id and its rows' transaction ids, for one member.
type placed struct {
	member   string
	instance string
	ids      []string
}

// place names the instances of l after the members' ranges in the settled view v: for each wanted
// instance it takes the next "<prefix>pod-<n>" whose token (cassandra.Token, the one the recorder
// writes) lies in that member's ranges.
func place(c *proc.Cluster, v admin.RingView, l layout, prefix string) ([]placed, error) {
	r, ok := c.RingOf(v)
	if !ok {
		return nil, fmt.Errorf("ring %v not in the view", c.Options().Ring)
	}
	members := slices.Clone(r.Members)
	slices.SortFunc(members, func(a, b admin.MemberView) int {
		return compareStrings(a.WorkerID, b.WorkerID)
	})
	if len(members) != len(l.rows) {
		return nil, fmt.Errorf("layout %s is for %d members, the ring has %d", l.name, len(l.rows), len(members))
	}
	ranges := make([]lease.Ranges, len(members))
	for i, m := range members {
		rs, err := lease.DecodeRanges(m.Ranges)
		if err != nil {
			return nil, fmt.Errorf("member %s: %w", m.WorkerID, err)
		}
		ranges[i] = rs
	}
	var out []placed
	n := 0
	for i, sizes := range l.rows {
		for _, size := range sizes {
			for ; ; n++ {
				if n > 1_000_000 {
					return nil, fmt.Errorf("no instance id found for member %s", members[i].WorkerID)
				}
				name := fmt.Sprintf("%spod-%d", prefix, n)
				if ranges[i].Contains(cassandra.Token(name)) {
					p := placed{member: members[i].WorkerID, instance: name}
					for j := range size {
						p.ids = append(p.ids, fmt.Sprintf("%s-%d", name, j))
					}
					out = append(out, p)
					n++
					break
				}
			}
		}
	}
	return out, nil
}

func compareStrings(a, b string) int {
	switch {
	case len(a) != len(b): // w2 before w10
		return len(a) - len(b)
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// importBatch is how many rows one RecordAt call writes (the late protocol publishes the
// directory once per call).
const importBatch = 1000

// record writes every placed instance's rows into the window after the one the clock showed two
// minutes ago (readable at once), through the recorder's late protocol, as `retryring record
// --backdate 2m` does; the small instances first, so that every member has work from the start.
func record(ctx context.Context, s *gocql.Session, c *proc.Cluster, ps []placed) error {
	o := c.Options()
	st, err := cassandra.NewStore(s, cassandra.StoreConfig{Keyspace: o.Keyspace, Ring: o.Ring, WindowMinutes: o.WindowMinutes})
	if err != nil {
		return err
	}
	// Unchecked: a benchmark on one host, whose workers share this process's clock.
	rec, err := recorder.New(st, recorder.Config{InstanceID: "flow-bench-importer", UncheckedClock: true})
	if err != nil {
		return err
	}
	w, err := window.Of(time.Now().Add(-2*time.Minute), o.WindowMinutes)
	if err != nil {
		return err
	}
	target := w.Next()
	order := slices.Clone(ps)
	slices.SortStableFunc(order, func(a, b placed) int { return len(a.ids) - len(b.ids) })
	for _, p := range order {
		for i := 0; i < len(p.ids); i += importBatch {
			var fs []recorder.Failure
			for _, id := range p.ids[i:min(i+importBatch, len(p.ids))] {
				fs = append(fs, recorder.Failure{TransactionID: id, InstanceID: p.instance, ImplType: "PaymentStep", AllocationKey: "k"})
			}
			if err := rec.RecordAt(ctx, target, fs...); err != nil {
				return fmt.Errorf("record %s into %v: %w", p.instance, target, err)
			}
		}
	}
	return nil
}

// allIDs lists the transaction ids of ps.
func allIDs(ps []placed) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.ids...)
	}
	return out
}
