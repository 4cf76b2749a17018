// Package swarm runs many real lease clients in one process, each with its own RSocket
// connection to the coordinators, spread over several rings, and records every lease element each
// one installed, so that a benchmark (bench/swarm) or a test (testkit/ringtest) can say what a
// fault cost a whole fleet: how long members went without a usable lease, which coordinator
// renewed them and when, whether their assignment changed, and whether two members of one ring
// could ever use one token at the same instant.
//
// Each member is a worker/leaseclient.Client, exactly as a production worker runs it; the swarm
// only adds its OnElement hook (the element, the connection it came on, its receipt) and reads the
// clients' logs for what the client has no hook for (failed sessions and redirects, by address).
// Worker i is w<i+1> and joins ring i mod Rings (region "swarm", cluster "c1", services s001, s002,
// ...), Workers/10 rings by default.
//
// What it owns: the members, their record (History, a copy analysed without locks) and the
// analyses, which are pure functions of a History: Intervals (when a member's guard would let it
// use which tokens: from an element's install until its end, the next install or the member's
// stop), Lapses, Overlaps (a sweep per ring, checked against a naive scan in the tests), Fault
// (the figures of one fault), Ages (lease age at receipt), and Settled (every ring at rest in a
// leader's view, and each member's guard holding what the leader assigned it).
//
// Every instant is a reading of this process's monotonic clock: all members share it, so the
// overlap check compares the members' own lease ends directly, as invariant 2 asks ("by the
// workers' own clocks"; here one clock serves them all).
//
// What it must never do: run a data plane (no Cassandra, no execution: a member only holds its
// lease), listen on anything, leave a client running after Close (Close waits for every Run, with
// a bound), or assert on a timing: it measures, and its users decide what a figure means.
//
// Usage:
//
//	s, err := swarm.New(swarm.Config{Workers: 200, Coordinators: addrs}) // 20 rings
//	s.Start(ctx)                                   // every client at once: a join storm
//	ok, why := s.Settled(leaderView, time.Now())   // poll until every ring is at rest
//	killed := time.Now()                           // ... kill -9 the leader ...
//	report := s.History().Fault(killed, time.Now(), leaderRSocketAddr)
//	err = s.Close()
package swarm
