package admin

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/lease"
)

// TestSparklineDrawsTheLastTenMinutes: samples sit by age on the x axis (now at the right edge,
// the oldest sample of the last ten minutes at the left) and by backlog age on the y axis (the
// largest at the top); unknown samples break the line and a lone sample is a dot.
func TestSparklineDrawsTheLastTenMinutes(t *testing.T) {
	now := t0
	at := func(ago time.Duration, ageMs int64, known bool) BacklogSample {
		return BacklogSample{At: now.Add(-ago), AgeMs: ageMs, Known: known}
	}
	sp := buildSparkline([]BacklogSample{
		at(time.Hour, 999_999, true), // older than the span: not drawn, not on the scale
		at(BacklogSpan, 60_000, true),
		at(BacklogSpan/2, 30_000, true),
		at(BacklogSpan/4, 0, false),
		at(BacklogSpan/8, 10_000, true),
		at(0, 0, false),
	}, now)
	if want := []string{"0.0,3.0 120.0,20.0"}; !reflect.DeepEqual(sp.Lines, want) {
		t.Errorf("lines %q; want %q", sp.Lines, want)
	}
	if len(sp.Dots) != 1 || sp.Dots[0].X != 210 || sp.Dots[0].Y < 31.3 || sp.Dots[0].Y > 31.4 {
		t.Errorf("dots %+v; want one at x 210, y 37 - 34/6", sp.Dots)
	}
	if sp.Top != "1 min 0 s" || sp.Span != "10 min 0 s" || sp.Known != 3 {
		t.Errorf("top %q, span %q, %d known; want 1 min 0 s, 10 min 0 s, 3", sp.Top, sp.Span, sp.Known)
	}
	// A leader elected 20 s ago spreads its 20 s over the whole width.
	young := buildSparkline([]BacklogSample{at(20*time.Second, 2000, true), at(10*time.Second, 1000, true), at(0, 0, true)}, now)
	if want := []string{"0.0,3.0 120.0,20.0 240.0,37.0"}; !reflect.DeepEqual(young.Lines, want) || young.Span != "20 s" {
		t.Errorf("young history: lines %q span %q; want %q over 20 s", young.Lines, young.Span, want)
	}
	if one := buildSparkline([]BacklogSample{at(0, 5000, true)}, now); len(one.Dots) != 1 || one.Dots[0].X != sparkWidth {
		t.Errorf("one sample: %+v; want a dot at the right edge", one)
	}
	if flat := buildSparkline([]BacklogSample{at(time.Minute, 0, true), at(0, 0, true)}, now); flat.Top != "1 s" {
		t.Errorf("a drained ring's scale: %q; want a second", flat.Top)
	}
	if empty := buildSparkline(nil, now); len(empty.Lines)+len(empty.Dots) != 0 {
		t.Errorf("no samples drew %+v", empty)
	}
}

func TestHumanAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		850 * time.Millisecond:         "850 ms",
		42 * time.Second:               "42 s",
		4*time.Minute + 12*time.Second: "4 min 12 s",
		2*time.Hour + 5*time.Minute:    "2 h 05 min",
		76 * time.Hour:                 "3 d 4 h",
	} {
		if got := humanAge(d); got != want {
			t.Errorf("humanAge(%v) = %q; want %q", d, got, want)
		}
	}
}

// TestRingPageShowsTheBacklog renders a leader's page: the backlog age and its figures, the
// sparkline, the unknown report marked, a breaker, and a pause read from controls.
func TestRingPageShowsTheBacklog(t *testing.T) {
	halves := lease.Split(2)
	now := t0
	age := (4*time.Minute + 12*time.Second).Milliseconds()
	v := RingView{CoordinatorID: "c1", LeaderID: "c1", Rings: []RingStateView{ringOf(
		activeMember("w1", 0, halves[0], fresh(lease.Report{PendingRows: 30, Breakers: []lease.BreakerReport{
			{Impl: "Payment", State: lease.BreakerOpen, OpenUntilMs: time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC).UnixMilli()}}},
			map[string]float64{"done": 3.25}, 0)),
		activeMember("w2", 1, halves[1], stale(lease.Report{PendingRows: 7})),
	)}}
	v.Rings[0].Backlog = RingBacklog(v.Rings[0], now)
	v.Rings[0].Backlog.AgeMs = &age // as if Node-0 had seen a directory window
	history := map[string][]BacklogSample{"eu/c1/orders": {
		{At: now.Add(-time.Minute), AgeMs: age + 60_000, Known: true}, {At: now, AgeMs: age, Known: true},
	}}
	m := buildPage(v, history, now, 0)
	r := m.Rings[0]
	if r.Age != "4 min 12 s" || len(r.Spark.Lines) != 1 || r.UnknownCount != 1 || !r.Members[1].ReportUnknown || r.Members[0].ReportUnknown {
		t.Errorf("age %q, spark %+v, %d unknown, w2 unknown %v", r.Age, r.Spark, r.UnknownCount, r.Members[1].ReportUnknown)
	}
	if r.Members[0].Pending != "30" || r.Members[0].DonePerS != "3.25" || r.Members[1].ReportText != "1 min 0 s ago" {
		t.Errorf("member columns %+v / %+v", r.Members[0], r.Members[1])
	}
	if want := []string{"w1: Payment open until 03:05:00"}; !reflect.DeepEqual(r.Breakers, want) {
		t.Errorf("breakers %q; want %q", r.Breakers, want)
	}
	// A ring paused and limited, a member that cannot obey it.
	rate := 12.5
	m.Rings[0].Controls = &ControlsView{Paused: true, Reason: "db migration", RatePerS: &rate}
	m.Rings[0].Members[1].NoControls = true
	var out bytes.Buffer
	if err := pageTemplate.Execute(&out, m); err != nil {
		t.Fatal(err)
	}
	html := out.String()
	for _, want := range []string{`<span class="badge paused" title="db migration">paused</span>`, "limit 12.5/s", "no controls", `data-ring="eu/c1/orders">4 min 12 s</span>`, "<polyline points=", "report unknown", "30 pending rows",
		"done 3.25", "breaker w1: Payment open until 03:05:00", "0 dead letters/h", "1 report unknown"} {
		if !strings.Contains(html, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(html, "ZgotmplZ") || strings.Contains(html, "kept by the leader") {
		t.Errorf("ZgotmplZ or a follower's note on the leader's page:\n%s", html)
	}

	// A follower's view has no reports: no backlog line, a link to the leader instead.
	follower := RingView{CoordinatorID: "c2", LeaderID: "c1", Coordinators: []NodeView{{ID: "c1", HTTPAddr: "10.0.0.1:7480"}},
		Rings: []RingStateView{ringOf(activeMember("w1", 0, lease.FullRing, nil))}}
	out.Reset()
	if err := pageTemplate.Execute(&out, buildPage(follower, nil, now, 0)); err != nil {
		t.Fatal(err)
	}
	if html := out.String(); !strings.Contains(html, `href="http://10.0.0.1:7480/">its page</a>`) || strings.Contains(html, "backlog age") || strings.Contains(html, "report unknown") {
		t.Errorf("follower page:\n%s", html)
	}
}
