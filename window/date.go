package window

import (
	"fmt"
	"time"
)

// Date is a civil day in UTC, the type behind Cassandra's date columns. Being a plain value it
// compares with == and works as a map key, which time.Time at midnight does not reliably do.
type Date struct {
	Year  int
	Month time.Month
	Day   int
}

// DateOf is the UTC day that contains t.
func DateOf(t time.Time) Date {
	y, m, d := t.UTC().Date()
	return Date{Year: y, Month: m, Day: d}
}

// ParseDate reads a day written as YYYY-MM-DD.
func ParseDate(s string) (Date, error) {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return Date{}, fmt.Errorf("%w: %q", ErrDate, s)
	}
	return DateOf(t), nil
}

// Time is midnight UTC at the start of the day.
func (d Date) Time() time.Time { return time.Date(d.Year, d.Month, d.Day, 0, 0, 0, 0, time.UTC) }

// AddDays moves n days forward (or back, for negative n) through month ends, New Year and
// leap days.
func (d Date) AddDays(n int) Date { return DateOf(d.Time().AddDate(0, 0, n)) }

// Compare returns -1, 0 or +1 as d is before, equal to or after o.
func (d Date) Compare(o Date) int {
	switch {
	case d.Year != o.Year:
		return cmpInt(d.Year, o.Year)
	case d.Month != o.Month:
		return cmpInt(int(d.Month), int(o.Month))
	default:
		return cmpInt(d.Day, o.Day)
	}
}

// Before reports whether d is an earlier day than o.
func (d Date) Before(o Date) bool { return d.Compare(o) < 0 }

// After reports whether d is a later day than o.
func (d Date) After(o Date) bool { return d.Compare(o) > 0 }

// String is YYYY-MM-DD, the form CQL accepts for a date literal.
func (d Date) String() string { return fmt.Sprintf("%04d-%02d-%02d", d.Year, int(d.Month), d.Day) }

// FirstOfYear is January 1st of the year.
func FirstOfYear(year int) Date { return Date{Year: year, Month: time.January, Day: 1} }

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	default:
		return 0
	}
}
