package window

import (
	"fmt"
	"time"
)

// MinutesPerDay is the number of minutes in a UTC day; a window length must divide it.
const MinutesPerDay = 1440

// Window is one slice of a UTC day: Length minutes starting at minute Minute of Day. It is
// the unit a regular node writes into, a worker reads, and Node-0 deletes from the directory.
// Build windows with New, Of or WriteTarget; the zero Window is not valid.
type Window struct {
	Day    Date
	Minute int // minute_of_day of the window's first minute: a multiple of Length
	Length int // minutes; divides 1440
}

// ValidateLength checks that a window of length minutes tiles the day exactly.
func ValidateLength(length int) error {
	if length < 1 || length > MinutesPerDay || MinutesPerDay%length != 0 {
		return fmt.Errorf("%w: got %d", ErrLength, length)
	}
	return nil
}

// PerDay is the number of windows of the given (valid) length in a day.
func PerDay(length int) int { return MinutesPerDay / length }

// New names the window of length minutes that starts at minute of day.
func New(day Date, minute, length int) (Window, error) {
	if err := ValidateLength(length); err != nil {
		return Window{}, err
	}
	if minute < 0 || minute >= MinutesPerDay || minute%length != 0 {
		return Window{}, fmt.Errorf("%w: minute %d, length %d", ErrMinute, minute, length)
	}
	return Window{Day: day, Minute: minute, Length: length}, nil
}

// Of is the window of length minutes that contains t (in UTC).
func Of(t time.Time, length int) (Window, error) {
	if err := ValidateLength(length); err != nil {
		return Window{}, err
	}
	t = t.UTC()
	m := t.Hour()*60 + t.Minute()
	return Window{Day: DateOf(t), Minute: m - m%length, Length: length}, nil
}

// WriteTarget is where a regular node whose clock reads now writes a failure: W+1, the window
// after the one now is in, so that the window a worker may be reading is closed to writers.
func WriteTarget(now time.Time, length int) (Window, error) {
	w, err := Of(now, length)
	if err != nil {
		return Window{}, err
	}
	return w.Next(), nil
}

// Ahead is the window that contains now+d, but never earlier than WriteTarget(now): a
// transient failure retried "d from now" still obeys the W+1 rule when d is shorter than a
// window (say a 60 minute cap on a 1440 minute window).
func Ahead(now time.Time, length int, d time.Duration) (Window, error) {
	target, err := WriteTarget(now, length)
	if err != nil {
		return Window{}, err
	}
	later, err := Of(now.Add(d), length)
	if err != nil {
		return Window{}, err
	}
	if later.Start().After(target.Start()) {
		return later, nil
	}
	return target, nil
}

// Next is the following window, on the next day after the last window of a day.
func (w Window) Next() Window { return w.Add(1) }

// Add moves k windows forward (backward for negative k) across days and years.
func (w Window) Add(k int) Window {
	total := w.Minute + k*w.Length // minutes from the start of w.Day
	days := floorDiv(total, MinutesPerDay)
	return Window{Day: w.Day.AddDays(days), Minute: total - days*MinutesPerDay, Length: w.Length}
}

// Start is the first instant of the window.
func (w Window) Start() time.Time {
	return w.Day.Time().Add(time.Duration(w.Minute) * time.Minute)
}

// End is the first instant after the window (the Start of Next).
func (w Window) End() time.Time { return w.Start().Add(time.Duration(w.Length) * time.Minute) }

// Contains reports whether t falls inside the window.
func (w Window) Contains(t time.Time) bool {
	return !t.Before(w.Start()) && t.Before(w.End())
}

// Compare orders windows by their start: -1, 0 or +1.
func (w Window) Compare(o Window) int {
	return w.Start().Compare(o.Start())
}

// String is "YYYY-MM-DD/minute" followed by the length, e.g. "2026-09-22/615+5m".
func (w Window) String() string { return fmt.Sprintf("%s/%d+%dm", w.Day, w.Minute, w.Length) }

// Readable reports whether a worker whose clock reads now may read window w: every past day is
// readable; otherwise the clock must be maxClockOffset past the window's start, so that every
// writer whose clock is off by less than maxClockOffset has moved on to a later window.
func Readable(w Window, now time.Time, maxClockOffset time.Duration) bool {
	if w.Day.Before(DateOf(now)) {
		return true
	}
	return !now.Before(w.Start().Add(maxClockOffset))
}

// DeletableWindow is Node-0's time gate for a window row: the clock is past the window's end
// plus maxClockOffset.
func DeletableWindow(w Window, now time.Time, maxClockOffset time.Duration) bool {
	return !now.Before(w.End().Add(maxClockOffset))
}

// DeletableDay is Node-0's time gate for a day row: the day is over plus maxClockOffset.
func DeletableDay(day Date, now time.Time, maxClockOffset time.Duration) bool {
	return !now.Before(day.AddDays(1).Time().Add(maxClockOffset))
}

func floorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
