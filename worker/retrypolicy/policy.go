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

// Class is what an execution's answer makes of a step, as a policy classifies a status. It is
// not worker.OutcomeKind, though three values share their names: this package is imported by the
// worker and by executors and cannot import them back, and an outcome has a fourth kind a status
// never classifies into (NotSent: the call never left). The HTTP executor maps one onto the other.
type Class int

// Classes. The zero value is no class, so that a missing override is never taken for one.
const (
	// Done: the step happened; its marker becomes COMMITTED.
	Done Class = iota + 1
	// Transient: the step may succeed later; it is recorded again into a later window.
	Transient
	// Permanent: the step will never succeed; it is dead-lettered at once.
	Permanent
)

func (c Class) String() string {
	switch c {
	case Done:
		return "done"
	case Transient:
		return "transient"
	case Permanent:
		return "permanent"
	default:
		return fmt.Sprintf("class(%d)", int(c))
	}
}

// Policy is the retry policy of one step. Use the values Default and Set.For return: a zero
// Policy has no attempts and no delay.
type Policy struct {
	// MaxAttempts is the number of executions after which a transient failure is dead-lettered.
	MaxAttempts int
	// MaxDelay caps the backoff delay and a downstream's Retry-After.
	MaxDelay time.Duration
	// Statuses overrides the built-in class of the statuses it holds. Shared between copies of
	// the Policy: read only.
	Statuses map[int]Class
}

// Default is the built-in policy: 10 attempts, 60 minutes, no overrides.
func Default() Policy {
	return Policy{MaxAttempts: DefaultMaxAttempts, MaxDelay: DefaultMaxDelay}
}

// Classify is the class of an HTTP status under p: its override, else the built-in rule (see
// the package documentation). Status 0 (no answer) is transient.
func (p Policy) Classify(status int) Class {
	if c, ok := p.Statuses[status]; ok {
		return c
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
