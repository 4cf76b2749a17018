package cassandra

import (
	"errors"

	"github.com/gocql/gocql"
)

// Transient reports whether err is a failure that a busy or briefly degraded cluster gives and
// that may well not happen again: a read or write timeout (among them a compare-and-set timeout,
// "Operation timed out - received only 0 responses"), too few replicas alive, an overloaded or
// bootstrapping coordinator, no answer within the client's timeout, a connection lost or none
// open. Whether a write it interrupted applied is unknown: retry only what is idempotent, and
// settle a compare-and-set by a serial read (ReplayMark). A malformed statement, a missing
// table, a refused login or the caller's own deadline is not transient.
func Transient(err error) bool {
	var (
		wt *gocql.RequestErrWriteTimeout
		rt *gocql.RequestErrReadTimeout
		un *gocql.RequestErrUnavailable
	)
	if errors.As(err, &wt) || errors.As(err, &rt) || errors.As(err, &un) {
		return true
	}
	var re gocql.RequestError
	if errors.As(err, &re) {
		switch re.Code() {
		case gocql.ErrCodeUnavailable, gocql.ErrCodeOverloaded, gocql.ErrCodeBootstrapping,
			gocql.ErrCodeWriteTimeout, gocql.ErrCodeReadTimeout:
			return true
		}
		return false
	}
	return errors.Is(err, gocql.ErrTimeoutNoResponse) || errors.Is(err, gocql.ErrConnectionClosed) ||
		errors.Is(err, gocql.ErrNoConnections)
}
