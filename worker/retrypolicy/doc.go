// Package retrypolicy decides what a retry worker does with the answer to one execution of a
// saga step: how an HTTP status classifies (done, transient, permanent), how many executions a
// step gets, and how long a transient failure waits before it is executed again. The policy is
// per step, keyed by stacksaga_impl_type, and comes from the worker's --retry-policy file.
//
// It is pure: no clock, no randomness, no I/O, except Load, which reads the policy file. Whoever
// calls it passes the time in; the same inputs always give the same answer, which is what lets a
// re-recording of the same (transaction, attempt) pick the same delay.
//
// # Classification
//
// Without an override (Policy.Statuses): 2xx and 409 are done (a downstream answering 409 to
// "already done"); 5xx, 408, 425 and 429 are transient; every other 4xx is permanent; anything else
// (1xx, a 3xx that was not followed, 0 for no answer) is transient, so that the attempt budget
// dead-letters it eventually and a misrouted URL fixed meanwhile loses nothing. A step's policy
// may move any status except a 2xx to another class: a 2xx means the step's effect happened
// (RFC 9110, section 15.3), and calling it again or dead-lettering it would both be wrong.
//
// # Delay
//
// A transient failure of a row with attempt a (0 for the first recording's first execution), in
// a ring whose windows are L minutes long, waits
//
//	d     = min(L minutes × 2^a, max_delay)      in nanoseconds
//	half  = floor(d / 2)
//	delay = half + floor((d − half) × h / 2^64)  so half <= delay < d
//
// where h is the first 8 bytes, read as a big-endian unsigned integer, of
//
//	SHA-256(transaction_id as UTF-8 bytes || a as an 8-byte big-endian two's-complement integer)
//
// That is d × (1/2 + u/2) with u = h / 2^64 in [0, 1), computed in integers so that the upper
// bound holds exactly and any language reproduces it (Python: d//2 + ((d - d//2) * h >> 64)). The failures of
// one outage minute spread over the later windows between d/2 and d, while one transaction at one
// attempt always gets the same delay.
//
// A 429 or 503 answer with a Retry-After header (delta-seconds or an HTTP-date, RFC 9110 section
// 10.2.3) asks for no call before then: the delay used is max(delay, Retry-After), capped at
// max_delay (Policy.WithRetryAfter). A header that is neither form is ignored.
//
// # The policy file
//
//	# retry-policy.yaml
//	default:                  # every step not named below; built-in defaults when missing
//	  max_attempts: 10        # executions before a transient failure is dead-lettered
//	  max_delay: 60m          # cap of the delay and of Retry-After (a Go duration)
//	Payment:                  # a stacksaga_impl_type
//	  max_attempts: 5
//	  transient_statuses: [409] # this downstream answers 409 while the same key is in flight
//	Inventory:
//	  done_statuses: [404]
//	  permanent_statuses: [503]
//
// A step inherits every key it does not set from default, and default from the built-in defaults
// (10 attempts, 60m); the status lists merge, the step's class winning for a status that both
// name. An empty file means the built-in defaults for every step. Parse refuses, naming the line:
// an unknown key, a key or a step given twice, a max_attempts that is not a positive integer, a
// max_delay that is not a positive duration, a status outside 100..599, a status in two lists of
// one entry, a 2xx in permanent_statuses or transient_statuses, and more than one YAML document.
package retrypolicy
