package retrypolicy

import (
	"fmt"
	"net/http"
	"time"
)

// Built-in defaults, for a step the policy file does not name and for a file without default.
const (
	DefaultMaxAttempts = 10
	DefaultMaxDelay    = 60 * time.Minute
)

// OutcomeKind is what one execution makes of a step: the one name of that idea, used by the
// policy (the kind a status classifies into) and by the worker (worker.Outcome.Kind, which names
// it worker.OutcomeKind and re-exports the values for executors). It lives here because the
// worker and its executors import this package and it cannot import them back.
type OutcomeKind int

// Outcome kinds. The zero value is none, so that a missing override is never taken for one and an
// Executor must pick one.
const (
	// Done: the step happened (or had already happened); its marker becomes COMMITTED.
	Done OutcomeKind = iota + 1
	// Transient: the step may succeed later; it is recorded again into a later window.
	Transient
	// Permanent: the step will never succeed; it is dead-lettered at once.
	Permanent
	// NotSent: the call never reached the downstream (the executor refused to send it past its
	// deadline). It is no outcome: no attempt is used, the row stays for a later pass. No status
	// classifies into it, and the policy file cannot name it.
	NotSent
)

// String is the kind as the worker's metrics and reports label it.
func (k OutcomeKind) String() string {
	switch k {
	case Done:
		return "done"
	case Transient:
		return "transient"
	case Permanent:
		return "permanent"
	case NotSent:
		return "not_sent"
	default:
		return fmt.Sprintf("outcome(%d)", int(k))
	}
}

// Policy is the retry policy of one step. Use the values Default and Set.For return: a zero
// Policy has no attempts and no delay.
type Policy struct {
	// MaxAttempts is the number of executions after which a transient failure is dead-lettered.
	MaxAttempts int
	// MaxDelay caps the backoff delay and a downstream's Retry-After.
	MaxDelay time.Duration
	// Statuses overrides the built-in kind of the statuses it holds (Done, Transient or
	// Permanent). Shared between copies of the Policy: read only.
	Statuses map[int]OutcomeKind
}

// Default is the built-in policy: 10 attempts, 60 minutes, no overrides.
func Default() Policy {
	return Policy{MaxAttempts: DefaultMaxAttempts, MaxDelay: DefaultMaxDelay}
}

// Classify is the kind of outcome an HTTP status means under p: its override, else the built-in
// rule (see the package documentation). Status 0 (no answer) is transient. It is always Done,
// Transient or Permanent: an override outside them (a Statuses map built by hand, not by Parse)
// counts as transient, as an answer the policy cannot place does.
func (p Policy) Classify(status int) OutcomeKind {
	if k, ok := p.Statuses[status]; ok {
		if k == Done || k == Permanent {
			return k
		}
		return Transient
	}
	switch {
	case isSuccess(status), status == http.StatusConflict:
		return Done
	case status >= 500,
		status == http.StatusRequestTimeout,
		status == http.StatusTooEarly,
		status == http.StatusTooManyRequests:
		return Transient
	case status >= 400:
		return Permanent
	default:
		return Transient
	}
}

func isSuccess(status int) bool { return status >= 200 && status < 300 }

// Set is the policies of every step: Default for the steps Steps does not name. The zero Set is
// the built-in policy for every step, so that a worker without a policy file needs none.
type Set struct {
	Default Policy
	// Steps maps a stacksaga_impl_type to its policy, complete (inherited fields filled in).
	Steps map[string]Policy
}

// For is the policy of the step impl.
func (s Set) For(impl string) Policy {
	if p, ok := s.Steps[impl]; ok {
		return p
	}
	// Parse never yields a Default without attempts, so none means the zero Set.
	if s.Default.MaxAttempts == 0 {
		return Default()
	}
	return s.Default
}
