package window

import "errors"

var (
	// ErrLength means a window length is not a whole number of minutes in 1..1440 that divides
	// 1440: such a length would let windows straddle midnight.
	ErrLength = errors.New("window: length must be in 1..1440 minutes and divide 1440")
	// ErrMinute means a minute of day is outside 0..1439 or is not the first minute of a
	// window of the given length.
	ErrMinute = errors.New("window: minute_of_day must be in 0..1439 and a multiple of the window length")
	// ErrDate means a text does not name a calendar day as YYYY-MM-DD.
	ErrDate = errors.New("window: invalid date")
)
