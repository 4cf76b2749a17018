package main

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// A running worker checks its session with a read of system.local at ONE (workerwatch.go), which
// one live node answers. With two of three replicas down that check passes while every query at
// LOCAL_QUORUM fails, so readiness also follows the cycles themselves: the worker is not ready once
// notReadyAfterFailedCycles cycles in a row have failed, or once cycles have failed without a
// success for notReadyAfterFailingFor (a cycle whose queries wait for their timeouts may take
// that long to fail twice), and ready again after one cycle that runs to its end.
const (
	notReadyAfterFailedCycles = 3
	notReadyAfterFailingFor   = 15 * time.Second
)

// cycleHealth turns how the worker's cycles end into a readiness reason, as a function of the
// failures in a row and the time since the first of them.
type cycleHealth struct {
	limit int           // failed cycles in a row that make the worker not ready
	after time.Duration // or time since the first failure of the run, without a success
	now   func() time.Time
	log   zerolog.Logger

	mu       sync.Mutex
	failures int       // cycles failed in a row
	since    time.Time // the first failure of the run
	last     string    // the last failure's error, on one line
	said     bool      // the not-ready line was logged for this run
}

func newCycleHealth(now func() time.Time, log zerolog.Logger) *cycleHealth {
	return &cycleHealth{limit: notReadyAfterFailedCycles, after: notReadyAfterFailingFor, now: now, log: log}
}

// ended records how a cycle ended (worker.Config.CycleEnded): nil for one that ran to its end.
func (h *cycleHealth) ended(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	if err == nil {
		if h.said {
			h.log.Info().Int("failures", h.failures).Dur("after", now.Sub(h.since)).
				Msg("a cycle succeeded again: the worker is ready")
		}
		h.failures, h.since, h.last, h.said = 0, time.Time{}, "", false
		return
	}
	if h.failures == 0 {
		h.since = now
	}
	h.failures++
	h.last = oneLine(strings.TrimPrefix(err.Error(), "cassandra: ")) // the reason says it already
	h.reasonAt(now)
}

// reason is what /readyz says of the cycles: "" while they succeed, or have not failed long
// enough to count.
func (h *cycleHealth) reason() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reasonAt(h.now())
}

// reasonAt is reason at now. Time alone may make the worker not ready, between two cycles' ends,
// so whichever asks first (a cycle's end or /readyz) logs the change, once per run of failures.
func (h *cycleHealth) reasonAt(now time.Time) string {
	lasted := now.Sub(h.since)
	if h.failures == 0 || (h.failures < h.limit && lasted < h.after) {
		return ""
	}
	reason := fmt.Sprintf("cassandra: %s failed in a row, for %v: %s", plural(h.failures, "cycle"), lasted.Round(time.Second), h.last)
	if !h.said {
		h.said = true
		h.log.Warn().Str("reason", reason).Msg("cycles keep failing: the worker is not ready (it keeps its ranges and retries)")
	}
	return reason
}
