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
	// ErrClockUntrusted means nothing was recorded because the recorder's clock is beyond
	// max_clock_offset / 2 from Cassandra's, or has no fresh measurement: a row it stamped could be
	// hidden by a worker's delete. The error wraps clockcheck.ErrClockUntrusted with the figures.
	ErrClockUntrusted = errors.New("recorder: clock untrusted, nothing recorded")
)
