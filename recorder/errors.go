package recorder

import "errors"

var (
	// ErrConfig means the recorder's configuration is invalid (empty instance id, window length
	// that does not divide 1440, a ring other than the store's, ...).
	ErrConfig = errors.New("recorder: invalid configuration")
	// ErrFailure means a failure cannot be recorded as given: an empty transaction id or an
	// instance id Cassandra cannot store.
	ErrFailure = errors.New("recorder: invalid failure")
	// ErrWindow means a target window does not have the service's length or is not a window.
	ErrWindow = errors.New("recorder: invalid target window")
	// ErrTooOld means a late target is before January 1st of last year: workers list only this
	// year's and last year's days, so the failure would never be found.
	ErrTooOld = errors.New("recorder: target window is older than last year")
)
