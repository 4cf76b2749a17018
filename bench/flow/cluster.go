package main

import (
	"github.com/retryring/retryring/wallclock"

	"context"
	"fmt"
	"os"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/internal/downstream"
	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/testkit/benchkit"
)

// env is what every run of the program shares.
type env struct {
	flags       benchkit.Flags
	session     *gocql.Session
	binary      string
	concurrency int
}

// fleet is one run's cluster: 3 coordinators on the default timing, the workers, the stub
// downstream in this process, a keyspace of its own. close ends it all.
type fleet struct {
	*proc.Cluster
	binary string
	close  func()
}

// start starts a fleet of binary (e.binary when "").
func (e *env) start(ctx context.Context, what, binary string, workers int, ds downstream.Config) (*fleet, error) {
	if binary == "" {
		binary = e.binary
	}
	dir, err := os.MkdirTemp("", "flow-bench-")
	if err != nil {
		return nil, err
	}
	g, err := proc.GroupIn(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ks := benchkit.KeyspaceName("flow_" + what)
	c, err := proc.StartCluster(ctx, g, proc.Options{
		Binary: binary, Workers: workers, Cassandra: e.flags.Addr, Keyspace: ks,
		Concurrency: e.concurrency, Downstream: ds,
	})
	cleanup := func() {
		_ = g.Close()
		e.flags.DropKeyspace(e.session, ks)
		if e.flags.Keep {
			fmt.Fprintf(os.Stderr, "logs kept in %s\n", dir)
			return
		}
		os.RemoveAll(dir)
	}
	if err != nil {
		cleanup()
		return nil, err
	}
	return &fleet{Cluster: c, binary: binary, close: func() { _ = c.Close(); cleanup() }}, nil
}

// ctl runs `retryring ctl <verb> --ring R --coordinator <leader> args...` as an operator would,
// and returns when the attempt that succeeded started and when it returned (the change is
// committed by then). Like an operator it tries again, for up to ctlBound, when the call fails
// (no leader during an election on a loaded machine): every verb used here is idempotent.
func (f *fleet) ctl(ctx context.Context, name, verb string, args ...string) (started, returned time.Time, err error) {
	ctx, cancel := context.WithTimeout(ctx, ctlBound)
	defer cancel()
	for attempt := 1; ; attempt++ {
		var leader *proc.Coordinator
		leader, err = f.WaitLeader(ctx)
		if err != nil {
			return started, returned, err
		}
		started = time.Now()
		_, err = f.Group.Run(ctx, proc.Spec{
			Name: name, Path: f.binary,
			Args: append([]string{"ctl", verb, "--ring", f.Options().Ring.String(), "--coordinator", leader.URL("")}, args...),
		})
		returned = time.Now()
		if err == nil || ctx.Err() != nil {
			return started, returned, err
		}
		fmt.Fprintf(os.Stderr, "%s: attempt %d failed, trying again: %v\n", name, attempt, err)
		wallclock.Sleep(ctx, time.Second)
	}
}

// ctlBound bounds one ctl call with its attempts.
const ctlBound = time.Minute

// accounting is what the stub says of a run's rows once they were drained.
type accounting struct {
	rows, done, twice, violations int
	calls                         int
}

func (a accounting) lost() int { return a.rows - a.done }

// waitDrained polls the stub until every id was answered done, or ctx ends or bound passes; it
// returns how long it waited and the accounting at the end.
func (f *fleet) waitDrained(ctx context.Context, ids []string, bound time.Duration) (time.Duration, accounting) {
	start := time.Now()
	deadline := start.Add(bound)
	for {
		done := f.Downstream.DoneIDs()
		n := 0
		for _, id := range ids {
			if done[id] {
				n++
			}
		}
		if n == len(ids) || time.Now().After(deadline) || ctx.Err() != nil {
			execs := f.Downstream.Executions()
			s := downstream.Summarize(execs)
			return time.Since(start), accounting{
				rows: len(ids), done: n, twice: s.ExecutedTwice, calls: len(execs),
				violations: len(f.Downstream.Violations()),
			}
		}
		wallclock.Sleep(ctx, time.Second)
	}
}
