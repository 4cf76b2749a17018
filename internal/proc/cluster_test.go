package proc

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/lease"
)

func member(id, inc string, epoch uint64, expires time.Time, rs ...lease.Range) admin.MemberView {
	m := admin.MemberView{WorkerID: id, Incarnation: inc, Epoch: epoch, State: admin.MemberActive,
		Ranges: lease.EncodeRanges(lease.Normalize(rs))}
	if !expires.IsZero() {
		m.LeaseExpiresMs = expires.UnixMilli()
	}
	return m
}

// view is a leader's view of DefaultRing with members ms, node indexes in their order, beside
// another ring.
func view(ms ...admin.MemberView) admin.RingView {
	for i := range ms {
		ms[i].NodeIndex = i
	}
	return admin.RingView{Rings: []admin.RingStateView{
		{Region: "other", Cluster: "c1", Service: "orders"},
		{Region: DefaultRing.Region, Cluster: DefaultRing.Cluster, Service: DefaultRing.Service, Members: ms},
	}}
}

func TestSettled(t *testing.T) {
	c := &Cluster{opts: Options{}.withDefaults()}
	halves := lease.Split(2)
	ok, why := c.Settled(view(member("w1", "i", 1, time.Time{}, halves[0]), member("w2", "i", 1, time.Time{}, halves[1])), map[string]string{"w1": "", "w2": "i"})
	if !ok {
		t.Fatalf("settled ring refused: %s", why)
	}
	cases := map[string]admin.RingView{
		"gap":     view(member("w1", "i", 1, time.Time{}, halves[0]), member("w2", "i", 1, time.Time{}, lease.Range{Start: halves[1].Start + 1, End: lease.MaxToken})),
		"overlap": view(member("w1", "i", 1, time.Time{}, lease.FullRing), member("w2", "i", 1, time.Time{}, halves[1])),
		"missing": view(member("w1", "i", 1, time.Time{}, lease.FullRing)),
		"stranger": view(member("w1", "i", 1, time.Time{}, halves[0]), member("w2", "i", 1, time.Time{}, halves[1]),
			member("w3", "i", 1, time.Time{})),
	}
	cases["old incarnation"] = view(member("w1", "i", 1, time.Time{}, halves[0]), member("w2", "old", 1, time.Time{}, halves[1]))
	departed := view(member("w1", "i", 1, time.Time{}, halves[0]), member("w2", "i", 1, time.Time{}, halves[1]))
	departed.Rings[1].Members[1].State = admin.MemberDeparted
	cases["departed"] = departed
	for name, v := range cases {
		if ok, _ := c.Settled(v, map[string]string{"w1": "", "w2": "i"}); ok {
			t.Errorf("%s: reported settled", name)
		}
	}
}

func TestSamplerMeasuresTheLongestUncoveredStretch(t *testing.T) {
	c := &Cluster{opts: Options{}.withDefaults()}
	s := &LeaseSampler{c: c, expiry: map[leaseKey]time.Time{}, ranges: map[leaseKey]lease.Ranges{}, held: map[string]heldLease{}, gone: map[string]heldLease{}}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	halves := lease.Split(2)
	step := func(ms int, v *admin.RingView) {
		if v != nil {
			s.learn(*v, at(ms))
		}
		s.evaluate(at(ms))
	}
	// Both halves leased until 3 s.
	v := view(member("w1", "a", 1, at(3000), halves[0]), member("w2", "a", 1, at(3000), halves[1]))
	step(0, &v)
	step(1000, nil) // no leader answered: the known expiries still hold
	if r := s.report.Leader; r.LongestGap != 0 || !r.Uncovered.Empty() {
		t.Fatalf("covered ring reported a gap: %+v", r)
	}
	// w2 dies: its half runs out at 3 s; w1 is renewed. At 7 s w1 takes the whole ring.
	v1 := view(member("w1", "a", 1, at(6000), halves[0]), member("w2", "a", 1, at(3000), halves[1]))
	step(3000, &v1)
	step(4000, nil)
	if r := s.report.Leader; !r.Uncovered.Equal(lease.Ranges{halves[1]}) {
		t.Fatalf("uncovered %v, want w2's half", r.Uncovered)
	}
	v2 := view(member("w1", "a", 2, at(10000), lease.FullRing))
	step(7000, &v2)
	r := s.report.Leader
	if r.LongestGap != 4*time.Second || !r.LongestGapFrom.Equal(at(3000)) || !r.Uncovered.Empty() {
		t.Fatalf("report %+v, want a 4 s gap from 3 s", r)
	}
	if len(r.Gaps) != 1 || r.Gaps[0].Length() != 4*time.Second {
		t.Fatalf("gaps %+v, want one of 4 s", r.Gaps)
	}
	// A new leader that has sent nothing yet (expiry 0) does not end w1's lease early.
	v3 := view(member("w1", "a", 2, time.Time{}, lease.FullRing))
	step(9000, &v3)
	if !s.report.Leader.Uncovered.Empty() {
		t.Fatalf("uncovered %v at 9 s", s.report.Leader.Uncovered)
	}
	// w1 departs (killed): its lease, valid until 10 s by the leader's estimate, serves nothing.
	v4 := view(member("w1", "a", 2, at(10000), lease.FullRing))
	v4.Rings[1].Members[0].State = admin.MemberDeparted
	step(9500, &v4)
	if !s.report.Leader.Uncovered.Equal(lease.Ranges{lease.FullRing}) {
		t.Fatalf("uncovered %v after w1 departed, want the whole ring", s.report.Leader.Uncovered)
	}
}

// TestSamplerWorkersView: by the workers' own answers, a lease covers its ranges until the end
// its worker last reported; a worker that does not answer (frozen) keeps that end, one that
// answers not ready or whose process is gone covers nothing from that sample on.
func TestSamplerWorkersView(t *testing.T) {
	s := &LeaseSampler{expiry: map[leaseKey]time.Time{}, ranges: map[leaseKey]lease.Ranges{}, held: map[string]heldLease{}, gone: map[string]heldLease{}}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	halves := lease.Split(2)
	ready := func(id string, until int, rs ...lease.Range) workerAnswer {
		return workerAnswer{id: id, running: true, known: true, ready: true, held: heldLease{ranges: rs, until: at(until)}}
	}
	step := func(ms int, answers ...workerAnswer) Coverage {
		for _, a := range answers {
			s.learnWorker(a)
		}
		s.evaluate(at(ms))
		return s.report.Workers
	}
	if c := step(0, ready("w1", 3000, halves[0]), ready("w2", 3000, halves[1])); !c.Uncovered.Empty() {
		t.Fatalf("both halves held: uncovered %v", c.Uncovered)
	}
	// w2 freezes: no answer, its last lease stands until 3 s; then its half is uncovered.
	frozen := workerAnswer{id: "w2", running: true}
	if c := step(2000, ready("w1", 5000, halves[0]), frozen); !c.Uncovered.Empty() {
		t.Fatalf("frozen w2 before its lease ends: uncovered %v", c.Uncovered)
	}
	if c := step(3500, frozen); !c.Uncovered.Equal(lease.Ranges{halves[1]}) {
		t.Fatalf("frozen w2 after its lease ended: uncovered %v, want its half", c.Uncovered)
	}
	// w1 takes the whole ring at 4.5 s: a gap of 1 s.
	c := step(4500, ready("w1", 8000, lease.FullRing), frozen)
	if !c.Uncovered.Empty() || c.LongestGap != time.Second || !c.LongestGapFrom.Equal(at(3500)) || len(c.Gaps) != 1 {
		t.Fatalf("coverage %+v, want one 1 s gap from 3.5 s", c)
	}
	if g := c.Gaps[0]; !g.Ranges.Equal(lease.Ranges{halves[1]}) || len(g.Holders) != 1 || g.Holders[0] != "w2" {
		t.Errorf("gap %+v; want w2's half, left by w2", g)
	}
	// w1's process is killed: nothing is covered, whatever its lease said; a worker that
	// answers not ready covers nothing either.
	if c := step(5000, workerAnswer{id: "w1"}); !c.Uncovered.Equal(lease.Ranges{lease.FullRing}) {
		t.Fatalf("after w1 was killed: uncovered %v, want the whole ring", c.Uncovered)
	}
	step(5500, ready("w3", 9000, lease.FullRing))
	if c := step(6000, workerAnswer{id: "w3", running: true, known: true}); !c.Uncovered.Equal(lease.Ranges{lease.FullRing}) {
		t.Fatalf("after w3 answered not ready: uncovered %v, want the whole ring", c.Uncovered)
	}
	if s.report.Leader.LongestGap != 6*time.Second {
		t.Errorf("leader view, with no view learnt, saw the whole ring uncovered from 0: longest %v, want 6s", s.report.Leader.LongestGap)
	}
}

func TestParseMetrics(t *testing.T) {
	m := ParseMetrics([]byte(`# HELP retryring_worker_executions_total Executions.
# TYPE retryring_worker_executions_total counter
retryring_worker_executions_total{outcome="done"} 12
retryring_worker_executions_total{outcome="transient"} 3
retryring_worker_executions_in_flight 2
weird{label="a b"} 1.5e+02 1700000000
bad line
`))
	if m.Sum("retryring_worker_executions_total") != 15 || m["retryring_worker_executions_in_flight"] != 2 ||
		m[`weird{label="a b"}`] != 150 || len(m) != 4 {
		t.Fatalf("parsed %v", m)
	}
}

func TestWorkerIncarnationIsTheCurrentLaunchs(t *testing.T) {
	dir := t.TempDir()
	p := &Process{spec: Spec{Name: "w1"}, logPath: dir + "/w1.log", launches: 2}
	w := &Worker{Process: p, ID: "w1"}
	log := `=== proc: launch 1 of w1 at ...
{"level":"info","incarnation":"aaaa","message":"worker started"}
=== proc: w1 (pid 1) exited at ...: signal: killed
=== proc: launch 2 of w1 at ...
`
	if err := os.WriteFile(p.logPath, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	if inc := w.Incarnation(); inc != "" {
		t.Fatalf("incarnation %q before the second launch logged one", inc)
	}
	log += `{"level":"info","incarnation":"bbbb","message":"worker started"}` + "\n"
	if err := os.WriteFile(p.logPath, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	if inc := w.Incarnation(); inc != "bbbb" {
		t.Fatalf("incarnation %q, want bbbb", inc)
	}
}

// TestStartClusterRelaunchesCoordinatorsThatLostAPortRace: every child here is the test binary
// failing as a coordinator that found its port taken; the cluster launches all coordinators again,
// on fresh ports and data directories, portAttempts times, then gives up with ErrPortInUse and
// leaves the processes in the group.
func TestStartClusterRelaunchesCoordinatorsThatLostAPortRace(t *testing.T) {
	t.Setenv(helperEnv, "bind-fail") // inherited by every child
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	g, err := GroupIn(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	c, err := StartCluster(bounded(t), g, Options{Binary: exe, Workers: -1})
	if !errors.Is(err, ErrPortInUse) || c != nil {
		t.Fatalf("StartCluster: %v, %v; want ErrPortInUse", c, err)
	}
	procs := g.Processes()
	if len(procs) != portAttempts*DefaultCoordinators {
		t.Fatalf("%d launches, want %d", len(procs), portAttempts*DefaultCoordinators)
	}
	addrs := map[string]bool{}
	for _, p := range procs {
		args := strings.Join(p.Args(), " ")
		if addrs[args] {
			t.Errorf("%s launched again on the same ports and data directory: %s", p.Name(), args)
		}
		addrs[args] = true
	}
	left, err := os.ReadDir(filepath.Join(g.Dir(), "data"))
	if err != nil || len(left) != 0 {
		t.Errorf("data directories of the failed attempts: %v (%v)", left, err)
	}
}

// TestStopEndsWorkersBeforeCoordinators: a coordinator gets SIGTERM only once every worker is
// gone, so that a worker can still leave the ring through it. The worker here ignores SIGTERM and
// is killed when the wait ends; the coordinator exits at SIGTERM.
func TestStopEndsWorkersBeforeCoordinators(t *testing.T) {
	g := newTestGroup(t)
	wp, wurl := launchHelper(t, g, "w1", "ignore-term")
	cp, curl := launchHelper(t, g, "c1", "http")
	for p, url := range map[*Process]string{wp: wurl, cp: curl} {
		if err := WaitOK(bounded(t), p, url); err != nil {
			t.Fatal(err)
		}
	}
	c := &Cluster{Group: g, workers: []*Worker{{Process: wp, ID: "w1"}}, coordinators: []*Coordinator{{Process: cp, ID: "c1"}}}
	if err := c.Stop(500 * time.Millisecond); !errors.Is(err, ErrTermTimeout) {
		t.Fatalf("Stop: %v, want the worker's ErrTermTimeout", err)
	}
	if wp.Running() || cp.Running() || !cp.LogContains("graceful") {
		t.Fatalf("after Stop: worker running %v, coordinator running %v; coordinator log:\n%s", wp.Running(), cp.Running(), cp.Tail(5))
	}
	if w, c := exitedAt(t, wp), exitedAt(t, cp); c.Before(w) {
		t.Errorf("the coordinator exited at %v, before the worker at %v", c, w)
	}
}

// exitedAt reads when p's last launch exited from proc's own line in its log.
func exitedAt(t *testing.T, p *Process) time.Time {
	t.Helper()
	m := regexp.MustCompile(`exited at (\S+):`).FindAllStringSubmatch(p.Tail(10), -1)
	if len(m) == 0 {
		t.Fatalf("%s: no exit line in\n%s", p.Name(), p.Tail(10))
	}
	at, err := time.Parse(time.RFC3339Nano, m[len(m)-1][1])
	if err != nil {
		t.Fatal(err)
	}
	return at
}
