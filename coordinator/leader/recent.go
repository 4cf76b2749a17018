package leader

import (
	"time"

	"github.com/retryring/retryring/fsm"
)

// ReproposeAfter spaces out identical proposals. Every command is idempotent, so proposing one
// again is harmless, but a command the state ignores (an Expire overtaken by a reconnect, say)
// would otherwise be proposed again on every pass, each pass woken by the previous commit.
const ReproposeAfter = 100 * time.Millisecond

// Recent is when the leader last committed each command, by its encoding: the reproposal dedup.
type Recent map[string]time.Time

// Wait is how long c must still wait before it is proposed again (zero: it may be proposed now).
func (r Recent) Wait(c fsm.Command, now time.Time) time.Duration {
	b, err := fsm.Encode(c)
	if err != nil {
		return 0
	}
	at, ok := r[string(b)]
	if !ok || now.Sub(at) >= ReproposeAfter {
		return 0
	}
	return ReproposeAfter - now.Sub(at)
}

// Mark records that c was committed at now, and forgets what may be proposed again.
func (r Recent) Mark(c fsm.Command, now time.Time) {
	for k, at := range r {
		if now.Sub(at) >= ReproposeAfter {
			delete(r, k)
		}
	}
	if b, err := fsm.Encode(c); err == nil {
		r[string(b)] = now
	}
}
