package recorder_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/clockcheck"
	"github.com/retryring/retryring/recorder"
	"github.com/retryring/retryring/testkit/cassandratest"
	"github.com/retryring/retryring/testkit/storetest"
	"github.com/retryring/retryring/window"
)

// skewedClock is the system clock moved by an offset the test changes.
type skewedClock struct{ by atomic.Int64 }

func (c *skewedClock) Now() time.Time { return time.Now().Add(time.Duration(c.by.Load())) }

// TestRecorderRefusesAnUntrustedClock: a recorder whose clock runs 1.5 s ahead of Cassandra's (the
// real node, measured through the real prober) is beyond half of the 2 s bound: Record and
// RecordAt return ErrClockUntrusted with the figures and write nothing, not even a directory row.
// Once the clock is back and measured again, the same failure is recorded.
func TestRecorderRefusesAnUntrustedClock(t *testing.T) {
	ctx := ctxT(t)
	session, _ := storetest.Keyspace(t)
	st := storetest.Store(t, 1)
	clock := &skewedClock{}
	clock.by.Store(int64(1500 * time.Millisecond))
	mon, err := clockcheck.NewMonitor(clockcheck.Config{Prober: clockcheck.NewCassandraProber(session, clock), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := mon.Measure(ctx); err != nil {
		t.Fatal(err)
	}
	rec, err := recorder.New(st, recorder.Config{InstanceID: "pod-ahead", Clock: clock, ClockCheck: mon})
	if err != nil {
		t.Fatal(err)
	}
	f := recorder.Failure{TransactionID: "tx-skewed", ImplType: "Payment"}
	_, err = rec.Record(ctx, f)
	if !errors.Is(err, recorder.ErrClockUntrusted) || !errors.Is(err, clockcheck.ErrClockUntrusted) ||
		!strings.Contains(err.Error(), "max_clock_offset 2s allows 1s") {
		t.Fatalf("Record with a clock 1.5 s ahead: %v; want ErrClockUntrusted with the figures", err)
	}
	past, err := window.Of(clock.Now().Add(-time.Hour), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.RecordAt(ctx, past, f); !errors.Is(err, recorder.ErrClockUntrusted) {
		t.Fatalf("RecordAt with a clock 1.5 s ahead: %v", err)
	}
	years := []int{time.Now().UTC().Year() - 1, time.Now().UTC().Year()}
	if rows := readAll(t, ctx, st, years...); len(rows) != 0 {
		t.Fatalf("an untrusted recorder wrote %v", rows)
	}
	if s := rec.Stats(); s.ClockRefusals != 2 || s.Statements != 0 {
		t.Fatalf("stats %+v: want 2 clock refusals and no statement", s)
	}

	clock.by.Store(0)
	if err := mon.Measure(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Record(ctx, f); err != nil {
		t.Fatalf("Record with the clock back: %v", err)
	}
	n := 0
	for _, rows := range readAll(t, ctx, st, years...) {
		n += len(rows)
	}
	if n != 1 {
		t.Fatalf("%d rows recorded, want 1", n)
	}
}

// TestRecorderRefusesWeakConsistency: a store whose session runs at ONE is refused, with the
// reason, unless AllowWeakConsistency says the caller means it.
func TestRecorderRefusesWeakConsistency(t *testing.T) {
	c := cassandratest.Cluster()
	c.Consistency = gocql.One
	s, err := c.CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, ks := storetest.Keyspace(t)
	st, err := cassandra.NewStore(s, cassandra.StoreConfig{Keyspace: ks, Ring: storetest.Ring(t), WindowMinutes: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Unchecked: this test is about the consistency level alone.
	_, err = recorder.New(st, recorder.Config{InstanceID: "pod-one", UncheckedClock: true})
	if !errors.Is(err, cassandra.ErrWeakConsistency) || !strings.Contains(err.Error(), "runs at ONE") {
		t.Fatalf("recorder on a session at ONE: %v; want ErrWeakConsistency", err)
	}
	if _, err := recorder.New(st, recorder.Config{InstanceID: "pod-one", AllowWeakConsistency: true, UncheckedClock: true}); err != nil {
		t.Fatalf("allowed: %v", err)
	}
}

// TestNewRefusesARecorderWithNoClockCheck: the library's default is safe. A Config with no
// ClockCheck is refused, saying what is missing and how to opt out; UncheckedClock is that opt-out;
// a Config with both is refused as contradictory.
func TestNewRefusesARecorderWithNoClockCheck(t *testing.T) {
	session, _ := storetest.Keyspace(t)
	st := storetest.Store(t, 1)
	_, err := recorder.New(st, recorder.Config{InstanceID: "pod-1"})
	if !errors.Is(err, recorder.ErrConfig) || !strings.Contains(err.Error(), "no ClockCheck") || !strings.Contains(err.Error(), "UncheckedClock") {
		t.Fatalf("New with no ClockCheck: %v; want ErrConfig naming ClockCheck and UncheckedClock", err)
	}
	if _, err := recorder.New(st, recorder.Config{InstanceID: "pod-1", UncheckedClock: true}); err != nil {
		t.Fatalf("New with UncheckedClock: %v", err)
	}
	mon, err := clockcheck.NewMonitor(clockcheck.Config{Prober: clockcheck.NewCassandraProber(session, nil)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := recorder.New(st, recorder.Config{InstanceID: "pod-1", ClockCheck: mon, UncheckedClock: true}); !errors.Is(err, recorder.ErrConfig) {
		t.Fatalf("New with a ClockCheck and UncheckedClock: %v; want ErrConfig", err)
	}
}
