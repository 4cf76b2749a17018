package worker

import (
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/lease"
)

// refusalLogEvery is how often at most the guard's refusals are logged. A lost lease refuses
// every query and execution of every row in flight, thousands a second: one line per refusal
// would bury everything else, and a line with the count by reason every 10 s is what a person
// can read.
const refusalLogEvery = 10 * time.Second

// refusalLog gathers the guard's refusals between two lines.
type refusalLog struct {
	mu       sync.Mutex
	lastLine time.Time // zero: no line yet, so the first refusal is said at once
	counts   map[string]uint64
}

// refusalReason names the guard's refusal err.
func refusalReason(err error) string {
	switch {
	case errors.Is(err, lease.ErrNoLease):
		return "no_lease"
	case errors.Is(err, lease.ErrLeaseExpired):
		return "expired"
	case errors.Is(err, lease.ErrLeaseTooShort):
		return "too_short"
	case errors.Is(err, lease.ErrTokenNotLeased):
		return "token_not_leased"
	default:
		return "other"
	}
}

// add counts a refusal at now and writes the line if one is due.
func (r *refusalLog) add(s *Scanner, err error, now time.Time) {
	r.mu.Lock()
	if r.counts == nil {
		r.counts = map[string]uint64{}
	}
	r.counts[refusalReason(err)]++
	r.mu.Unlock()
	r.flush(s, now)
}

// flush writes the line if refusals are waiting and the last line is refusalLogEvery old.
func (r *refusalLog) flush(s *Scanner, now time.Time) {
	r.mu.Lock()
	if len(r.counts) == 0 || !r.lastLine.IsZero() && now.Sub(r.lastLine) < refusalLogEvery {
		r.mu.Unlock()
		return
	}
	counts, since := r.counts, r.lastLine
	r.counts, r.lastLine = nil, now
	r.mu.Unlock()

	reasons := make([]string, 0, len(counts))
	var total uint64
	for why, n := range counts {
		reasons = append(reasons, why)
		total += n
	}
	sort.Strings(reasons)
	d := zerolog.Dict()
	for _, why := range reasons {
		d = d.Uint64(why, counts[why])
	}
	ev := s.log.Warn().Uint64("refused", total).Dict("by_reason", d)
	if !since.IsZero() {
		ev = ev.Dur("over", now.Sub(since))
	}
	ev.Msg("the lease guard refused queries and executions (counts since the last such line); their buckets are kept")
}
