package lease_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/clocktest"
)

func testLease(epoch uint64, validFrom time.Time, ttl time.Duration, rs ...lease.Range) lease.Lease {
	return lease.Lease{
		WorkerID: "w1", Ring: lease.RingKey{Region: "eu", Cluster: "c1", Service: "orders"},
		NodeIndex: 1, NodeCount: 3, Epoch: epoch, Generation: 7,
		Ranges: rs, TTL: ttl, ValidFrom: validFrom,
	}
}

// wantErr fails unless err is (or wraps) want; want nil means success.
func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		t.Fatalf("%s: got %v, want %v", what, err, want)
	}
	if want != nil && !lease.IsGuardError(err) {
		t.Fatalf("%s: %v is not a guard error", what, err)
	}
}

func TestGuardLifecycle(t *testing.T) {
	const margin = 100 * time.Millisecond
	clock := clocktest.New(clocktest.Start)
	g := lease.NewGuard(clock, margin)
	need := 500 * time.Millisecond

	_, err := g.Check(need)
	wantErr(t, "before Set", err, lease.ErrNoLease)
	_, err = g.CheckToken(0, need)
	wantErr(t, "CheckToken before Set", err, lease.ErrNoLease)
	_, err = g.CheckNode0(need)
	wantErr(t, "CheckNode0 before Set", err, lease.ErrNoLease)
	if _, ok := g.Current(); ok {
		t.Fatal("Current reports a lease before Set")
	}

	start := clock.Now()
	g.Set(testLease(5, start, 3*time.Second, lease.Range{Start: -100, End: 100}))

	l, err := g.Check(need)
	wantErr(t, "fresh lease", err, nil)
	if l.Epoch != 5 {
		t.Fatalf("Check returned epoch %d", l.Epoch)
	}
	for _, tok := range []int64{-100, 0, 100} {
		_, err = g.CheckToken(tok, need)
		wantErr(t, fmt.Sprintf("token %d inside", tok), err, nil)
	}
	for _, tok := range []int64{-101, 101, lease.MinToken, lease.MaxToken} {
		_, err = g.CheckToken(tok, need)
		wantErr(t, fmt.Sprintf("token %d outside", tok), err, lease.ErrTokenNotLeased)
	}
	_, err = g.CheckNode0(need)
	wantErr(t, "node index 1", err, lease.ErrNotNode0)

	// 2.4s in, 600ms are left: exactly need+margin is enough, one nanosecond less is not.
	clock.Set(start.Add(3*time.Second - need - margin))
	_, err = g.Check(need)
	wantErr(t, "remaining == need+margin", err, nil)
	clock.Advance(time.Nanosecond)
	_, err = g.Check(need)
	wantErr(t, "remaining < need+margin", err, lease.ErrLeaseTooShort)
	_, err = g.CheckToken(0, need)
	wantErr(t, "CheckToken too short", err, lease.ErrLeaseTooShort)
	_, err = g.Check(0)
	wantErr(t, "short operation still fits", err, nil)

	clock.Set(start.Add(3*time.Second - time.Nanosecond))
	_, err = g.Check(0)
	wantErr(t, "last nanosecond with margin", err, lease.ErrLeaseTooShort)

	clock.Set(start.Add(3 * time.Second))
	_, err = g.Check(0)
	wantErr(t, "at ValidFrom+TTL", err, lease.ErrLeaseExpired)
	clock.Advance(time.Hour)
	_, err = g.CheckToken(0, 0)
	wantErr(t, "long after", err, lease.ErrLeaseExpired)
	if cur, ok := g.Current(); !ok || cur.Epoch != 5 {
		t.Fatal("Current must still return the expired lease")
	}

	// A renewal (same epoch) revives it; an older epoch does not replace it.
	now := clock.Now()
	g.Set(testLease(5, now, 3*time.Second, lease.Range{Start: -100, End: 100}))
	_, err = g.Check(need)
	wantErr(t, "renewed", err, nil)
	g.Set(testLease(4, now, 3*time.Second, lease.FullRing))
	_, err = g.CheckToken(lease.MaxToken, need)
	wantErr(t, "older epoch ignored", err, lease.ErrTokenNotLeased)
	g.Set(testLease(6, now, 3*time.Second, lease.FullRing))
	_, err = g.CheckToken(lease.MaxToken, need)
	wantErr(t, "newer epoch installed", err, nil)

	g.Clear()
	_, err = g.Check(need)
	wantErr(t, "after Clear", err, lease.ErrNoLease)
	if _, ok := g.Current(); ok {
		t.Fatal("Current reports a lease after Clear")
	}
}

func TestGuardNode0(t *testing.T) {
	clock := clocktest.New(clocktest.Start)
	g := lease.NewGuard(clock, 100*time.Millisecond)
	l := testLease(1, clock.Now(), 3*time.Second, lease.Split(3)[0])
	l.NodeIndex = 0
	g.Set(l)
	if got, err := g.CheckNode0(time.Second); err != nil || !got.IsNode0() {
		t.Fatalf("Node-0 lease refused: %v", err)
	}
	clock.Advance(2 * time.Second)
	_, err := g.CheckNode0(time.Second)
	wantErr(t, "Node-0 too short", err, lease.ErrLeaseTooShort)
	clock.Advance(time.Second)
	_, err = g.CheckNode0(0)
	wantErr(t, "Node-0 expired", err, lease.ErrLeaseExpired)
}

func TestGuardDoesNotAliasTheCallersRanges(t *testing.T) {
	clock := clocktest.New(clocktest.Start)
	g := lease.NewGuard(clock, 0)
	rs := []lease.Range{{Start: 10, End: 20}, {Start: 0, End: 5}}
	g.Set(testLease(1, clock.Now(), time.Second, rs...))
	rs[0], rs[1] = lease.FullRing, lease.FullRing
	if _, err := g.CheckToken(100, 0); !errors.Is(err, lease.ErrTokenNotLeased) {
		t.Fatalf("changing the caller's slice changed the guard's lease: %v", err)
	}
	if cur, _ := g.Current(); !cur.Ranges.Equal(lease.Ranges{{Start: 0, End: 5}, {Start: 10, End: 20}}) {
		t.Fatalf("guard holds %v, want its ranges normalized", cur.Ranges)
	}
}

func TestNewGuardWithoutClockUsesSystemClock(t *testing.T) {
	g := lease.NewGuard(nil, 0)
	g.Set(testLease(1, time.Now(), time.Hour, lease.FullRing))
	if _, err := g.Check(time.Second); err != nil {
		t.Fatalf("an hour-long lease from now is refused on the system clock: %v", err)
	}
}

// guardModel is the rule of invariant 5, written as plainly as possible over nanoseconds:
// allowed iff a lease is held, now < validFrom+ttl, validFrom+ttl-now >= need+margin, and (for a
// token) the token lies in one of the ranges the lease was given.
type guardModel struct {
	margin    int64
	held      bool
	epoch     uint64
	expiresAt int64 // validFrom + ttl
	ranges    []lease.Range
	node0     bool
	floor     uint64 // newest epoch ever set; survives clear
}

func (m *guardModel) set(epoch uint64, validFrom, ttl int64, rs []lease.Range, node0 bool) {
	if epoch < m.floor {
		return
	}
	*m = guardModel{margin: m.margin, held: true, epoch: epoch, expiresAt: validFrom + ttl, ranges: rs, node0: node0, floor: epoch}
}

func (m *guardModel) check(now, need int64) error {
	switch {
	case !m.held:
		return lease.ErrNoLease
	case now >= m.expiresAt: // not now < validFrom+ttl
		return lease.ErrLeaseExpired
	case m.expiresAt-now < need+m.margin: // not validFrom+ttl-now >= need+margin
		return lease.ErrLeaseTooShort
	}
	return nil
}

func (m *guardModel) checkToken(now, need, token int64) error {
	if err := m.check(now, need); err != nil {
		return err
	}
	for _, r := range m.ranges {
		if r.Start <= token && token <= r.End {
			return nil
		}
	}
	return lease.ErrTokenNotLeased
}

func (m *guardModel) checkNode0(now, need int64) error {
	if err := m.check(now, need); err != nil {
		return err
	}
	if !m.node0 {
		return lease.ErrNotNode0
	}
	return nil
}

var guardErrors = []error{lease.ErrNoLease, lease.ErrLeaseExpired, lease.ErrLeaseTooShort, lease.ErrTokenNotLeased, lease.ErrNotNode0}

// sameOutcome fails unless got is exactly the model's outcome: nil, or the one guard sentinel.
func sameOutcome(t *rapid.T, what string, got, want error) {
	t.Helper()
	if want == nil {
		if got != nil {
			t.Fatalf("%s: guard refused with %v, model allows", what, got)
		}
		return
	}
	for _, e := range guardErrors {
		if errors.Is(got, e) != errors.Is(want, e) {
			t.Fatalf("%s: guard says %v, model says %v", what, got, want)
		}
	}
}

// Durations are drawn in milliseconds, so that a history often lands exactly on an expiry or on
// the last instant an operation still fits, plus an occasional nanosecond to step over them.
func TestGuardHistoriesMatchModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ms := func(label string, lo, hi int64) int64 {
			return rapid.Int64Range(lo, hi).Draw(t, label) * int64(time.Millisecond)
		}
		margin := rapid.SampledFrom([]int64{0, int64(100 * time.Millisecond), ms("margin", 0, 500)}).Draw(t, "margin")
		clock := clocktest.New(clocktest.Start)
		origin := clock.Now()
		g := lease.NewGuard(clock, time.Duration(margin))
		m := &guardModel{margin: margin}
		var now int64      // nanoseconds since origin
		var lastNeed int64 // the need advance_to_boundary aimed at, so that checks can hit it exactly
		drawNeed := func(t *rapid.T) int64 {
			if rapid.Bool().Draw(t, "reuse_need") {
				return lastNeed
			}
			return ms("need", 0, 3000)
		}
		tokens := append(slices.Clone(endpoints), 42, -42)

		t.Repeat(map[string]func(*rapid.T){
			"set": func(t *rapid.T) {
				epoch := rapid.Uint64Range(0, 6).Draw(t, "epoch")
				validFrom := now - ms("lag", 0, 2000) // the demand was sent before now
				ttl := ms("ttl", 0, 4000)
				rs := rapid.SliceOfN(genRange, 0, 4).Draw(t, "ranges")
				node0 := rapid.Bool().Draw(t, "node0")
				l := testLease(epoch, origin.Add(time.Duration(validFrom)), time.Duration(ttl), rs...)
				if node0 {
					l.NodeIndex = 0
				}
				g.Set(l)
				m.set(epoch, validFrom, ttl, rs, node0)
			},
			"advance": func(t *rapid.T) {
				d := ms("advance", 0, 1500)
				if rapid.Bool().Draw(t, "plus_ns") {
					d++
				}
				now += d
				clock.Advance(time.Duration(d))
			},
			"advance_to_boundary": func(t *rapid.T) {
				if !m.held {
					t.Skip("no lease")
				}
				// Land on the expiry, or on the last instant an operation of need still fits, ±1ns.
				need := ms("need", 0, 1000)
				lastNeed = need
				target := rapid.SampledFrom([]int64{m.expiresAt, m.expiresAt - need - margin}).Draw(t, "target")
				target += rapid.Int64Range(-1, 1).Draw(t, "skew")
				if target < now {
					t.Skip("boundary already passed; time never runs backwards")
				}
				clock.Advance(time.Duration(target - now))
				now = target
			},
			"clear": func(t *rapid.T) {
				g.Clear()
				*m = guardModel{margin: margin, floor: m.floor}
			},
			"check": func(t *rapid.T) {
				need := drawNeed(t)
				l, err := g.Check(time.Duration(need))
				sameOutcome(t, "Check", err, m.check(now, need))
				if err == nil && l.Epoch != m.epoch {
					t.Fatalf("Check returned epoch %d, model holds %d", l.Epoch, m.epoch)
				}
			},
			"check_token": func(t *rapid.T) {
				need := drawNeed(t)
				token := rapid.SampledFrom(tokens).Draw(t, "token")
				_, err := g.CheckToken(token, time.Duration(need))
				sameOutcome(t, fmt.Sprintf("CheckToken(%d)", token), err, m.checkToken(now, need, token))
			},
			"check_node0": func(t *rapid.T) {
				need := drawNeed(t)
				_, err := g.CheckNode0(time.Duration(need))
				sameOutcome(t, "CheckNode0", err, m.checkNode0(now, need))
			},
			"": func(t *rapid.T) {
				cur, ok := g.Current()
				if ok != m.held || ok && cur.Epoch != m.epoch {
					t.Fatalf("guard holds (%v, epoch %d), model (%v, epoch %d)", ok, cur.Epoch, m.held, m.epoch)
				}
			},
		})
	})
}

// Readers check tokens while a writer installs ever newer epochs, a stale element now and then, and
// moves the clock. Run under -race; the assertions hold whatever the interleaving.
func TestGuardConcurrentUse(t *testing.T) {
	clock := clocktest.New(clocktest.Start)
	g := lease.NewGuard(clock, 10*time.Millisecond)
	const readers, rounds = 4, 2000
	ranges := lease.Split(4)

	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, readers)
	for r := range readers {
		wg.Go(func() {
			var lastEpoch uint64
			for i := 0; ; i++ {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				token := ranges[(r+i)%len(ranges)].Start
				l, err := g.CheckToken(token, time.Millisecond)
				switch {
				case err != nil && !lease.IsGuardError(err):
					errs <- fmt.Errorf("reader %d: unexpected error %w", r, err)
					return
				case err == nil && !l.Ranges.Contains(token):
					errs <- fmt.Errorf("reader %d: allowed token %d outside %v", r, token, l.Ranges)
					return
				case err == nil && l.Epoch < lastEpoch:
					errs <- fmt.Errorf("reader %d: epoch went back from %d to %d", r, lastEpoch, l.Epoch)
					return
				case err == nil:
					lastEpoch = l.Epoch
				}
			}
		})
	}
	for i := range rounds {
		epoch := uint64(i/2 + 1)
		if i%7 == 0 && i%500 != 0 {
			epoch = 0 // a stale element: must be ignored (unless the guard was just cleared)
		}
		g.Set(testLease(epoch, clock.Now(), 50*time.Millisecond, ranges[i%len(ranges)]))
		clock.Advance(time.Duration(i%3) * 20 * time.Millisecond)
		if i%500 == 499 {
			g.Clear()
		}
	}
	close(stop)
	wg.Wait()
	for range readers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestGuardClearDoesNotReviveOlderEpochs(t *testing.T) {
	g := lease.NewGuard(lease.SystemClock{}, 0)
	g.Set(lease.Lease{Epoch: 7, TTL: time.Hour, ValidFrom: time.Now(), Ranges: lease.Ranges{lease.FullRing}})
	g.Clear()
	g.Set(lease.Lease{Epoch: 6, TTL: time.Hour, ValidFrom: time.Now(), Ranges: lease.Ranges{lease.FullRing}})
	if _, err := g.Check(0); !errors.Is(err, lease.ErrNoLease) {
		t.Fatalf("a stale epoch after Clear was installed again: %v", err)
	}
}
