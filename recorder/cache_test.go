package recorder

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryring/retryring/window"
)

func TestCacheDedupsConcurrentFirstWrites(t *testing.T) {
	c := newDirCache(100)
	key := dirKey{level: 2, day: window.Date{Year: 2026, Month: 1, Day: 1}, minute: 5}
	var calls atomic.Int32
	release := make(chan struct{})
	write := func(context.Context) error {
		calls.Add(1)
		<-release
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- c.ensure(context.Background(), key, time.Now().Add(time.Hour), write)
		}()
	}
	// Every goroutine is either the writer (blocked in write) or a waiter; let the write finish.
	for calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d writes for one key, want 1", n)
	}
	if err := c.ensure(context.Background(), key, time.Now(), func(context.Context) error {
		t.Fatal("cached key written again")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestCacheFailedWriteIsNotCached(t *testing.T) {
	c := newDirCache(100)
	key := dirKey{level: 1}
	boom := errors.New("boom")
	inWrite := make(chan struct{})
	fail := make(chan struct{})
	writer := make(chan error, 1)
	go func() {
		writer <- c.ensure(context.Background(), key, time.Now().Add(time.Hour), func(context.Context) error {
			close(inWrite)
			<-fail
			return boom
		})
	}()
	<-inWrite
	// The flight is registered: a second caller now shares it and must get its error, not
	// write on its own while the first write is undecided.
	waiter := make(chan error, 1)
	var successes atomic.Int32
	go func() {
		waiter <- c.ensure(context.Background(), key, time.Now().Add(time.Hour), func(context.Context) error {
			successes.Add(1) // only reachable if the waiter came after the failure
			return nil
		})
	}()
	close(fail)
	if err := <-writer; !errors.Is(err, boom) {
		t.Fatalf("writer got %v", err)
	}
	if err := <-waiter; err != nil && !errors.Is(err, boom) {
		t.Fatalf("waiter got %v, want boom (shared) or nil (wrote after the failure)", err)
	}
	if err := c.ensure(context.Background(), key, time.Now().Add(time.Hour), func(context.Context) error { successes.Add(1); return nil }); err != nil {
		t.Fatal(err)
	}
	// The failure cached nothing, so exactly one later call wrote the key, and then it was cached.
	if n := successes.Load(); n != 1 {
		t.Fatalf("%d successful writes after the failure, want 1", n)
	}
}

func TestCacheWaiterHonoursContext(t *testing.T) {
	c := newDirCache(100)
	key := dirKey{level: 3, instance: "x"}
	block := make(chan struct{})
	inWrite := make(chan struct{})
	go func() {
		_ = c.ensure(context.Background(), key, time.Now().Add(time.Hour), func(context.Context) error {
			close(inWrite)
			<-block
			return nil
		})
	}()
	<-inWrite
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.ensure(ctx, key, time.Now(), func(context.Context) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("waiter with a cancelled ctx got %v", err)
	}
	close(block)
}

func TestCacheSweepAndBound(t *testing.T) {
	c := newDirCache(3)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 5 {
		k := dirKey{level: 4, bucket: i}
		if err := c.ensure(context.Background(), k, t0.Add(time.Duration(i)*time.Minute), func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if c.len() > 3 {
			t.Fatalf("cache holds %d entries, bound 3", c.len())
		}
	}
	c.sweep(t0.Add(time.Hour))
	if c.len() != 0 {
		t.Fatalf("sweep left %d expired entries", c.len())
	}
}
