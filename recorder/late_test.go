package recorder_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/recorder"
	"github.com/retryring/retryring/testkit/clocktest"
	"github.com/retryring/retryring/testkit/storetest"
	"github.com/retryring/retryring/window"
)

// sim is a worker and Node-0 rolled into one, reduced to what touches the directory: it reads
// every bucket it finds, marks its rows executed, deletes the bucket, and deletes instance
// markers, windows and days with the checked deletes, raising the checkpoints as Node-0 does.
// The windows are all in the past, so the time gates always pass.
type sim struct {
	st       *cassandra.Store
	mu       sync.Mutex
	executed map[string]int
}

func (s *sim) pass(ctx context.Context, year int) error {
	days, dcp, err := s.st.ListLiveDays(ctx, year)
	if err != nil {
		return err
	}
	var firstKeptDay *window.Date
	for _, d := range days {
		ws, wcp, err := s.st.ListLiveWindows(ctx, d)
		if err != nil {
			return err
		}
		var firstKept *window.Window
		var lastDeleted *window.Window
		for _, w := range ws {
			ins, err := s.st.ListAllInstances(ctx, w, 0)
			if err != nil {
				return err
			}
			for _, in := range ins {
				bs, err := s.st.ListBuckets(ctx, w, in.ID)
				if err != nil {
					return err
				}
				for _, b := range bs {
					k := cassandra.BucketKey{Window: w, InstanceID: in.ID, Bucket: b}
					readFrom := cassandra.CheckedDeleteTime(time.Now(), simOffset)
					if err := s.st.ForEachTransaction(ctx, k, func(t cassandra.Transaction) error {
						s.mu.Lock()
						s.executed[t.ID]++
						s.mu.Unlock()
						return nil
					}); err != nil {
						return err
					}
					if err := s.st.DeleteBucketPartition(ctx, k, readFrom); err != nil {
						return err
					}
					if err := s.st.DeleteBucket(ctx, w, in.ID, b, readFrom); err != nil {
						return err
					}
				}
				if _, err := s.st.DeleteInstanceChecked(ctx, w, in.ID, simOffset); err != nil {
					return err
				}
			}
			gone, err := s.st.DeleteWindowChecked(ctx, w, simOffset)
			if err != nil {
				return err
			}
			if gone {
				lastDeleted = &w
			} else if firstKept == nil {
				firstKept = &w
			}
		}
		raised := wcp.Minute
		if firstKept != nil {
			raised = firstKept.Minute
		} else if lastDeleted != nil {
			raised = lastDeleted.Minute + lastDeleted.Length
		}
		if raised > wcp.Minute {
			if _, err := s.st.SetWindowCheckpoint(ctx, d, wcp, raised); err != nil {
				return err
			}
		}
		gone, err := s.st.DeleteDayChecked(ctx, d, simOffset)
		if err != nil {
			return err
		}
		if !gone && firstKeptDay == nil {
			firstKeptDay = &d
		}
	}
	if firstKeptDay != nil && firstKeptDay.After(dcp.Date) {
		_, err := s.st.SetDayCheckpoint(ctx, year, dcp, *firstKeptDay)
		return err
	}
	return nil
}

// simOffset is the clock bound the sim stamps its deletes with; the late writer's clock lags the
// sim's (the wall clock) by all of it.
const simOffset = 2 * time.Second

// Late writes race a worker and Node-0 that delete everything they see: every failure is still
// executed exactly once, and the directory drains. The interleavings this rarely hits on its
// own are forced one by one in cassandra.TestCheckedDeletesRaceLateWriters.
func TestLateWritesSurviveConcurrentCompaction(t *testing.T) {
	ctx := ctxT(t)
	st := storetest.Store(t, 1)
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	rec := newRecorder(t, st.WithWriteClock(clocktest.NewShifted(-simOffset)), clocktest.New(now), nil)
	s := &sim{st: st, executed: map[string]int{}}

	const writes = 60
	stop := make(chan struct{})
	simErr := make(chan error, 1)
	go func() {
		defer close(simErr)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := s.pass(ctx, 2026); err != nil {
				simErr <- err
				return
			}
		}
	}()
	for i := range writes {
		// Three windows on two past days, so windows and days are deleted and come back.
		day := window.Date{Year: 2026, Month: time.November, Day: 18 + i%2}
		target := window.Window{Day: day, Minute: 600 + i%3, Length: 1}
		if err := rec.RecordAt(ctx, target, recorder.Failure{TransactionID: fmt.Sprintf("late-%03d", i), InstanceID: fmt.Sprintf("pod-%d", i%4)}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-simErr; err != nil {
		t.Fatal(err)
	}
	// Drain what the racing passes left.
	for range 3 {
		if err := s.pass(ctx, 2026); err != nil {
			t.Fatal(err)
		}
	}
	for i := range writes {
		id := fmt.Sprintf("late-%03d", i)
		if s.executed[id] != 1 {
			t.Errorf("%s executed %d times, want 1", id, s.executed[id])
		}
	}
	if days, _, _ := st.ListLiveDays(ctx, 2026); len(days) != 0 {
		t.Fatalf("directory not drained: days %v", days)
	}
}
