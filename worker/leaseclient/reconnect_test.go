package leaseclient

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryring/retryring/testkit/clocktest"
)

// fixedRandom is a scripted randomSource: the first address is always index start, every draw r.
type fixedRandom struct {
	start int
	r     float64
}

func (f fixedRandom) IntN(int) int     { return f.start }
func (f fixedRandom) Float64() float64 { return f.r }

// attemptLog records the client's connection attempts (address and the delay waited before it)
// through Client.pause, without waiting: the tests check the plan's choices, not the clock.
type attemptLog struct {
	mu    sync.Mutex
	steps []step
	limit int           // once this many are recorded, pause blocks until the test ends
	at    func(n int)   // if set, called with each count just before the attempt it counts
	full  chan struct{} // closed when limit is reached
	once  sync.Once
}

func newAttemptLog(limit int) *attemptLog {
	return &attemptLog{limit: limit, full: make(chan struct{})}
}

func (l *attemptLog) pause(ctx context.Context, addr string, d time.Duration) bool {
	l.mu.Lock()
	if len(l.steps) >= l.limit {
		l.mu.Unlock()
		<-ctx.Done()
		return false
	}
	l.steps = append(l.steps, step{addr, d, false})
	n := len(l.steps)
	at := l.at
	l.mu.Unlock()
	if at != nil {
		at(n)
	}
	if n == l.limit {
		l.once.Do(func() { close(l.full) })
	}
	return true
}

func (l *attemptLog) get() []step {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]step(nil), l.steps...)
}

func (l *attemptLog) wait(t *testing.T) []step {
	t.Helper()
	select {
	case <-l.full:
	case <-time.After(15 * time.Second):
		t.Fatalf("%d connection attempts recorded, want %d: %v", len(l.get()), l.limit, l.get())
	}
	return l.get()
}

// refusingAddr is a loopback address nothing listens on: connections to it are refused.
func refusingAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestReconnectPacingFollowsTheLease: the leader dies under a worker that holds a usable lease. The
// worker retries at once at the next address, then after 100, 200, 400 ms (draws of 0.5 around a
// mean that doubles from 100 ms) round the whole list; once its lease has run out on its clock, the delays double from 50 ms
// (half of the 100 ms ceiling).
func TestReconnectPacingFollowsTheLease(t *testing.T) {
	clock, sq := clocktest.New(clocktest.Start), &seq{}
	leader := startFake(t, "leader", clock, sq)
	d1, d2 := refusingAddr(t), refusingAddr(t)
	log := newAttemptLog(9)
	var killed atomic.Bool
	log.at = func(n int) {
		// The clock moves past the lease's end just before the fourth attempt after the kill (the
		// fifth in all): that attempt fails without a usable lease.
		if killed.Load() && n == 5 {
			clock.Advance(time.Minute)
		}
	}
	h := runPaced(t, clock, []string{leader.addr, d1, d2}, log)
	waitElements(t, h.c, 2)
	if got := log.get(); len(got) != 1 {
		t.Fatalf("attempts before the kill %v, want one", got)
	}
	killed.Store(true)
	leader.quiesce(t)
	leader.kill()

	got := log.wait(t)
	checkSteps(t, "attempts", got, []step{
		{leader.addr, 0, false},
		{d1, 0, false}, {d2, 100 * ms, false}, {leader.addr, 200 * ms, false}, {d1, 400 * ms, false}, // holding
		{d2, 50 * ms, false}, {leader.addr, 100 * ms, false}, {d1, 200 * ms, false}, {d2, 400 * ms, false}, // gone
	})
}

// runPaced starts a client with the protocol's default pacing, draws of 0.5 and the first address
// first, its attempts recorded in log.
func runPaced(t *testing.T, clock *clocktest.Manual, addrs []string, log *attemptLog) *runHandle {
	t.Helper()
	cfg := Config{WorkerID: "worker-1", Ring: testRing, Coordinators: addrs, Clock: clock, Backoff: defaultBackoff}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.random = fixedRandom{start: 0, r: 0.5}
	c.pause = log.pause
	ctx, cancel := context.WithCancel(context.Background())
	h := &runHandle{c: c, cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- c.Run(ctx) }()
	t.Cleanup(func() {
		quiesceAll(t)
		cancel()
		select {
		case <-h.done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
	return h
}

// TestRedirectToARefusingAddressMovesOn: a follower names a leader that refuses connections (it
// died, the follower has not noticed); the client follows at once, and after the refusal goes on
// to the next address of its list, not to the dead one again, and finds the leader there.
func TestRedirectToARefusingAddressMovesOn(t *testing.T) {
	for _, listed := range []bool{true, false} {
		t.Run(fmt.Sprintf("dead leader listed=%v", listed), func(t *testing.T) {
			clock, sq := clocktest.New(clocktest.Start), &seq{}
			leader := startFake(t, "leader", clock, sq)
			follower := startFake(t, "follower", clock, sq)
			dead := refusingAddr(t)
			follower.set(func(f *fakeCoord) { f.follower, f.leaderID, f.leaderAddr = true, "dead", dead })
			addrs := []string{follower.addr, leader.addr}
			if listed {
				addrs = []string{follower.addr, dead, leader.addr}
			}
			log := newAttemptLog(3)
			h := runPaced(t, clock, addrs, log)
			waitLease(t, h.c, "a lease from the leader", anyLease)
			checkSteps(t, "attempts", log.wait(t), []step{
				{follower.addr, 0, false}, {dead, 0, false}, {leader.addr, 50 * ms, false},
			})
			if st := h.c.Stats(); st.Redirects != 1 {
				t.Errorf("stats %+v, want one redirect", st)
			}
		})
	}
}

// TestNoLeaderCoordinatorsAreTried: the only configured address answers no_leader naming the
// coordinators it knows; the client tries the one it did not know and gets its lease there.
func TestNoLeaderCoordinatorsAreTried(t *testing.T) {
	clock, sq := clocktest.New(clocktest.Start), &seq{}
	leader := startFake(t, "leader", clock, sq)
	follower := startFake(t, "follower", clock, sq)
	follower.set(func(f *fakeCoord) {
		f.follower = true
		f.noLeaderBody = fmt.Sprintf(`{"error":"no_leader","message":"election","coordinators":[`+
			`{"id":"follower","rsocket_addr":%q},{"id":"leader","rsocket_addr":%q}]}`, follower.addr, leader.addr)
	})
	log := newAttemptLog(2)
	h := runPaced(t, clock, []string{follower.addr}, log)
	waitLease(t, h.c, "a lease from the learned leader", anyLease)
	checkSteps(t, "attempts", log.wait(t), []step{{follower.addr, 0, false}, {leader.addr, 50 * ms, false}})
}
