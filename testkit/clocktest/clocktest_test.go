package clocktest

import (
	"sync"
	"testing"
	"time"
)

func TestManualMovesOnlyWhenTold(t *testing.T) {
	c := New(Start)
	if !c.Now().Equal(Start) {
		t.Fatalf("Now() = %v, want %v", c.Now(), Start)
	}
	c.Advance(1500 * time.Millisecond)
	if got := c.Now().Sub(Start); got != 1500*time.Millisecond {
		t.Fatalf("after Advance: %v past the start, want 1.5s", got)
	}
	back := Start.Add(-time.Hour)
	c.Set(back)
	if !c.Now().Equal(back) {
		t.Fatalf("after Set: %v, want %v", c.Now(), back)
	}
}

// TestManualIsSafeConcurrently is for -race: advances from many goroutines all count.
func TestManualIsSafeConcurrently(t *testing.T) {
	c := New(Start)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				c.Advance(time.Millisecond)
				_ = c.Now()
			}
		}()
	}
	wg.Wait()
	if got := c.Now().Sub(Start); got != 800*time.Millisecond {
		t.Fatalf("800 advances of 1ms moved the clock %v", got)
	}
}
