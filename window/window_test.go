package window

import (
	"errors"
	"testing"
	"time"

	"pgregory.net/rapid"
)

var lengths []int

func init() {
	for l := 1; l <= MinutesPerDay; l++ {
		if MinutesPerDay%l == 0 {
			lengths = append(lengths, l)
		}
	}
}

func mustOf(t testing.TB, at time.Time, l int) Window {
	t.Helper()
	w, err := Of(at, l)
	if err != nil {
		t.Fatalf("Of(%s, %d): %v", at, l, err)
	}
	return w
}

// drawTime draws an instant between 1999 and 2101, so leap years, the 2100 non-leap century
// year and New Years are all in range.
func drawTime(t *rapid.T, label string) time.Time {
	lo := time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	hi := time.Date(2101, 12, 31, 23, 59, 59, 999e6, time.UTC).UnixMilli()
	return time.UnixMilli(rapid.Int64Range(lo, hi).Draw(t, label)).UTC()
}

func TestValidateLength(t *testing.T) {
	for _, l := range []int{1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60, 120, 1440} {
		if err := ValidateLength(l); err != nil {
			t.Errorf("ValidateLength(%d) = %v", l, err)
		}
	}
	for _, l := range []int{-5, 0, 7, 11, 13, 1439, 1441, 2880} {
		if err := ValidateLength(l); !errors.Is(err, ErrLength) {
			t.Errorf("ValidateLength(%d) = %v, want ErrLength", l, err)
		}
		if _, err := Of(time.Now(), l); !errors.Is(err, ErrLength) {
			t.Errorf("Of(_, %d) = %v, want ErrLength", l, err)
		}
	}
	if len(lengths) != 36 {
		t.Fatalf("1440 has 36 divisors, found %d", len(lengths))
	}
}

func TestNewRejectsMisalignedMinute(t *testing.T) {
	d := Date{2026, time.March, 1}
	for _, m := range []int{-1, 1440, 3, 7} {
		if _, err := New(d, m, 5); !errors.Is(err, ErrMinute) {
			t.Errorf("New(%d, 5) = %v, want ErrMinute", m, err)
		}
	}
	if w, err := New(d, 1435, 5); err != nil || w.Minute != 1435 {
		t.Fatalf("New(1435, 5) = %v, %v", w, err)
	}
}

func TestMidnightAndNewYear(t *testing.T) {
	at := time.Date(2025, 12, 31, 23, 59, 30, 0, time.UTC)
	w := mustOf(t, at, 1)
	if w.Day != (Date{2025, time.December, 31}) || w.Minute != 1439 {
		t.Fatalf("Of(23:59:30) = %s", w)
	}
	target, err := WriteTarget(at, 1)
	if err != nil {
		t.Fatal(err)
	}
	if target.Day != (Date{2026, time.January, 1}) || target.Minute != 0 {
		t.Fatalf("WriteTarget(Dec 31 23:59:30) = %s, want 2026-01-01/0", target)
	}
	if got := target.Add(-1); got != w {
		t.Fatalf("Add(-1) = %s, want %s", got, w)
	}
	w5 := mustOf(t, at, 5)
	if w5.Minute != 1435 || w5.Next().Day.Year != 2026 || w5.Next().Minute != 0 {
		t.Fatalf("5-minute window rollover: %s -> %s", w5, w5.Next())
	}
}

func TestLeapDay(t *testing.T) {
	w := mustOf(t, time.Date(2028, 2, 28, 23, 59, 0, 0, time.UTC), 1)
	if n := w.Next(); n.Day != (Date{2028, time.February, 29}) || n.Minute != 0 {
		t.Fatalf("2028-02-28 23:59 + 1 = %s, want 2028-02-29/0", n)
	}
	w = mustOf(t, time.Date(2028, 2, 29, 23, 59, 0, 0, time.UTC), 1)
	if n := w.Next(); n.Day != (Date{2028, time.March, 1}) {
		t.Fatalf("2028-02-29 23:59 + 1 = %s, want 2028-03-01", n)
	}
	w = mustOf(t, time.Date(2100, 2, 28, 23, 59, 0, 0, time.UTC), 1) // 2100 is not a leap year
	if n := w.Next(); n.Day != (Date{2100, time.March, 1}) {
		t.Fatalf("2100-02-28 23:59 + 1 = %s, want 2100-03-01", n)
	}
	if w := mustOf(t, time.Date(2028, 1, 1, 0, 0, 0, 0, time.UTC), 60); w.Add(366*24).Day != (Date{2029, time.January, 1}) {
		t.Fatalf("2028 has 366 days: %s", w.Add(366*24))
	}
}

func TestPropertyOf(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := rapid.SampledFrom(lengths).Draw(t, "length")
		at := drawTime(t, "at")
		w, err := Of(at, l)
		if err != nil {
			t.Fatal(err)
		}
		if !w.Contains(at) || w.Start().After(at) || !w.End().After(at) {
			t.Fatalf("%s does not contain %s", w, at)
		}
		if w.Minute%l != 0 || w.Minute < 0 || w.Minute >= MinutesPerDay {
			t.Fatalf("%s: misaligned", w)
		}
		if w.End().Sub(w.Start()) != time.Duration(l)*time.Minute {
			t.Fatalf("%s: wrong length", w)
		}
		if again, _ := Of(w.Start(), l); again != w {
			t.Fatalf("Of(Start(%s)) = %s", w, again)
		}
		if again, _ := Of(w.End().Add(-time.Nanosecond), l); again != w {
			t.Fatalf("Of(End(%s)-1ns) = %s", w, again)
		}
		if n, _ := New(w.Day, w.Minute, l); n != w {
			t.Fatalf("New round trip %s != %s", n, w)
		}
	})
}

func TestPropertyNextAndAdd(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := rapid.SampledFrom(lengths).Draw(t, "length")
		w, _ := Of(drawTime(t, "at"), l)
		k := rapid.IntRange(-3*PerDay(l), 3*PerDay(l)).Draw(t, "k")

		n := w.Next()
		if !n.Start().Equal(w.End()) {
			t.Fatalf("Next(%s) = %s does not start at End", w, n)
		}
		if n.Compare(w) != 1 || w.Compare(n) != -1 || w.Compare(w) != 0 {
			t.Fatalf("Compare order broken for %s, %s", w, n)
		}
		moved := w.Add(k)
		if got := moved.Add(-k); got != w {
			t.Fatalf("Add(%d).Add(%d) = %s, want %s", k, -k, got, w)
		}
		if want := w.Start().Add(time.Duration(k*l) * time.Minute); !moved.Start().Equal(want) {
			t.Fatalf("Add(%d) of %s starts %s, want %s", k, w, moved.Start(), want)
		}
		if of, _ := Of(moved.Start(), l); of != moved {
			t.Fatalf("Add(%d) = %s, not canonical (%s)", k, moved, of)
		}
		step := w
		for i := 0; i < k%7; i++ {
			step = step.Next()
		}
		if k%7 >= 0 && step != w.Add(k%7) {
			t.Fatalf("Next^%d = %s, Add = %s", k%7, step, w.Add(k%7))
		}
	})
}

func TestPropertyWriteTarget(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := rapid.SampledFrom(lengths).Draw(t, "length")
		now := drawTime(t, "now")
		target, err := WriteTarget(now, l)
		if err != nil {
			t.Fatal(err)
		}
		cur, _ := Of(now, l)
		if target != cur.Next() {
			t.Fatalf("WriteTarget(%s) = %s, want %s", now, target, cur.Next())
		}
		if !target.Start().After(now) {
			t.Fatalf("W+1 %s starts at or before now %s", target, now)
		}
		offset := time.Duration(rapid.Int64Range(0, int64(time.Minute)).Draw(t, "offset"))
		if Readable(target, now, offset) {
			t.Fatalf("a write target %s is readable at %s", target, now)
		}
		if DeletableWindow(target, now, offset) {
			t.Fatalf("a write target %s is deletable at %s", target, now)
		}
	})
}

func TestPropertyGates(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := rapid.SampledFrom(lengths).Draw(t, "length")
		w, _ := Of(drawTime(t, "at"), l)
		offset := time.Duration(rapid.Int64Range(0, int64(10*time.Second)).Draw(t, "offset"))
		now := w.Start().Add(time.Duration(rapid.Int64Range(-int64(48*time.Hour), int64(48*time.Hour)).Draw(t, "delta")))

		wantReadable := DateOf(now).After(w.Day) || !now.Before(w.Start().Add(offset))
		if Readable(w, now, offset) != wantReadable {
			t.Fatalf("Readable(%s, %s, %s) = %v", w, now, offset, !wantReadable)
		}
		if DeletableWindow(w, now, offset) && !Readable(w, now, offset) {
			t.Fatalf("%s deletable but not readable at %s", w, now)
		}
		if DeletableWindow(w, now, offset) != !now.Before(w.End().Add(offset)) {
			t.Fatalf("DeletableWindow(%s, %s)", w, now)
		}
		if DeletableDay(w.Day, now, offset) && !DeletableWindow(w, now, offset) {
			t.Fatalf("day of %s deletable before the window at %s", w, now)
		}
	})
}

func TestGateEdges(t *testing.T) {
	w, _ := New(Date{2026, time.September, 22}, 615, 1)
	off := 2 * time.Second
	start := w.Start()
	if Readable(w, start.Add(off-time.Nanosecond), off) || !Readable(w, start.Add(off), off) {
		t.Fatal("Readable edge is not start+offset")
	}
	end := w.End()
	if DeletableWindow(w, end.Add(off-time.Nanosecond), off) || !DeletableWindow(w, end.Add(off), off) {
		t.Fatal("DeletableWindow edge is not end+offset")
	}
	dayEnd := time.Date(2026, 9, 23, 0, 0, 0, 0, time.UTC)
	if DeletableDay(w.Day, dayEnd.Add(off-time.Nanosecond), off) || !DeletableDay(w.Day, dayEnd.Add(off), off) {
		t.Fatal("DeletableDay edge is not midnight+offset")
	}
	// A window of yesterday is readable at once, even within the offset after midnight.
	last, _ := New(Date{2026, time.September, 21}, 1439, 1)
	if !Readable(last, dayEnd.Add(-23*time.Hour-59*time.Minute+time.Millisecond), time.Hour) {
		t.Fatal("a past day must always be readable")
	}
}

func TestAhead(t *testing.T) {
	now := time.Date(2026, 12, 31, 23, 59, 30, 0, time.UTC)
	cases := []struct {
		length int
		d      time.Duration
		want   Window
	}{
		{1, 0, Window{Date{2027, time.January, 1}, 0, 1}},
		{1, 2 * time.Minute, Window{Date{2027, time.January, 1}, 1, 1}},
		{1, 60 * time.Minute, Window{Date{2027, time.January, 1}, 59, 1}},
		{1440, 60 * time.Minute, Window{Date{2027, time.January, 1}, 0, 1440}},
		{5, 40 * time.Minute, Window{Date{2027, time.January, 1}, 35, 5}},
	}
	for _, c := range cases {
		got, err := Ahead(now, c.length, c.d)
		if err != nil || got != c.want {
			t.Errorf("Ahead(%s, %d, %s) = %s, %v; want %s", now, c.length, c.d, got, err, c.want)
		}
	}
}

func TestDate(t *testing.T) {
	d, err := ParseDate("2024-02-29")
	if err != nil || d != (Date{2024, time.February, 29}) || d.String() != "2024-02-29" {
		t.Fatalf("ParseDate = %v, %v", d, err)
	}
	if _, err := ParseDate("2023-02-29"); !errors.Is(err, ErrDate) {
		t.Fatalf("ParseDate(2023-02-29) = %v, want ErrDate", err)
	}
	if d.AddDays(1) != (Date{2024, time.March, 1}) || d.AddDays(-60).Year != 2023 {
		t.Fatal("AddDays")
	}
	if !d.Before(d.AddDays(1)) || !d.AddDays(1).After(d) || d.Compare(d) != 0 {
		t.Fatal("ordering")
	}
	loc := time.FixedZone("x", -5*3600) // 20:00 on the 28th at UTC-5 is the 29th in UTC
	if got := DateOf(time.Date(2024, 2, 28, 20, 0, 0, 0, loc)); got != d {
		t.Fatalf("DateOf uses UTC: %s", got)
	}
}
