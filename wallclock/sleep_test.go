package wallclock_test

import (
	"context"
	"testing"
	"time"

	"github.com/retryring/retryring/wallclock"
)

// TestSleep: Sleep reports whether its duration passed, and a context that ended stops it.
func TestSleep(t *testing.T) {
	if !wallclock.Sleep(context.Background(), time.Millisecond) {
		t.Error("a 1 ms sleep with a live context did not report its end")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if wallclock.Sleep(ctx, time.Hour) {
		t.Error("a sleep whose context had ended reported that its hour passed")
	}
}
