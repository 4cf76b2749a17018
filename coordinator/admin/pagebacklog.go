package admin

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The ring page's backlog line, sparkline and report column (page.go lays out the rest).

// layBacklog fills the ring's backlog line and its sparkline.
func layBacklog(rp *ringPage, b *BacklogView, samples []BacklogSample, now time.Time) {
	rp.Backlog = b
	rp.Age = ReportUnknown
	if b.AgeMs != nil {
		rp.Age = humanAge(time.Duration(*b.AgeMs) * time.Millisecond)
	}
	outcomes := append(append([]string(nil), KnownOutcomes...), OutcomeOther)
	for _, o := range outcomes {
		if v, ok := b.ExecutionsPerS[o]; ok {
			rp.Executions = append(rp.Executions, outcomeRate{Outcome: o, Rate: humanRate(v)})
		}
	}
	rp.DeadLetters = humanRate(b.DeadLettersPerHour)
	for _, br := range b.OpenBreakers {
		impl := br.Impl
		if impl == "" {
			impl = "whole ring"
		}
		line := fmt.Sprintf("%s: %s %s", br.WorkerID, impl, strings.ReplaceAll(br.State, "_", " "))
		if br.OpenUntilMs > 0 {
			line += " until " + time.UnixMilli(br.OpenUntilMs).UTC().Format("15:04:05")
		}
		rp.Breakers = append(rp.Breakers, line)
	}
	rp.LeaseUnfit = b.LeaseUnfit
	rp.UnknownCount = len(b.ReportsUnknown)
	rp.Spark = buildSparkline(samples, now)
}

// layReport fills the member's report column; a nil report (a follower's view) leaves it empty.
func layReport(mp *memberPage, r *MemberReport) {
	if r == nil {
		return
	}
	mp.ReportUnknown = r.State != ReportFresh
	mp.ReportText = "none yet"
	if r.AgeMs != nil {
		mp.ReportText = humanAge(time.Duration(*r.AgeMs)*time.Millisecond) + " ago"
	}
	if r.Report != nil {
		mp.Pending = strconv.FormatInt(r.PendingRows, 10)
		mp.Clock, mp.ClockBeyond = ClockText(r.Clock)
	}
	if r.ExecutionsPerS != nil {
		mp.DonePerS = humanRate(r.ExecutionsPerS["done"])
	}
}

// Sparkline geometry, in SVG units (the page draws it at this size).
const (
	sparkWidth  = 240.0
	sparkHeight = 40.0
	sparkPad    = 3.0
)

// sparkline is a ring's backlog age over the last BacklogSpan: one polyline per run of known
// samples (unknown ones leave a gap), a dot for a run of one. The right edge is now and the left
// one the oldest sample: a leader elected a minute ago draws its minute across the whole width,
// not as a sliver at the right.
type sparkline struct {
	Lines []string // "x,y x,y ..." for a polyline's points
	Dots  []sparkDot
	Top   string // the age at the top of the scale
	Span  string // the time from the left edge to now
	Known int    // known samples drawn
}

type sparkDot struct{ X, Y float64 }

func buildSparkline(samples []BacklogSample, now time.Time) sparkline {
	var sp sparkline
	top := int64(time.Second / time.Millisecond) // a drained ring draws a flat line at the bottom
	span := time.Duration(0)
	for _, s := range samples {
		ago := now.Sub(s.At)
		if ago > BacklogSpan {
			continue
		}
		span = max(span, ago)
		if s.Known && s.AgeMs > top {
			top = s.AgeMs
		}
	}
	sp.Top = humanAge(time.Duration(top) * time.Millisecond)
	sp.Span = humanAge(span)
	if span == 0 {
		span = BacklogSpan // one sample, or none: at the right edge
	}
	var run []sparkDot
	flush := func() {
		switch len(run) {
		case 0:
		case 1:
			sp.Dots = append(sp.Dots, run[0])
		default:
			pts := make([]string, len(run))
			for i, d := range run {
				pts[i] = strconv.FormatFloat(d.X, 'f', 1, 64) + "," + strconv.FormatFloat(d.Y, 'f', 1, 64)
			}
			sp.Lines = append(sp.Lines, strings.Join(pts, " "))
		}
		run = run[:0]
	}
	for _, s := range samples {
		ago := now.Sub(s.At)
		if !s.Known || ago > BacklogSpan {
			flush()
			continue
		}
		x := sparkWidth * (1 - max(ago, 0).Seconds()/span.Seconds())
		y := sparkHeight - sparkPad - (sparkHeight-2*sparkPad)*float64(s.AgeMs)/float64(top)
		run = append(run, sparkDot{X: x, Y: y})
		sp.Known++
	}
	flush()
	return sp
}

// humanAge writes a duration for people: "850 ms", "42 s", "4 min 12 s", "2 h 05 min", "3 d 4 h".
func humanAge(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%d h %02d min", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%d d %d h", int(d.Hours())/24, int(d.Hours())%24)
}

// humanRate writes a rate with two significant digits at least (1.5, 0.25, 120).
func humanRate(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case v < 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}
