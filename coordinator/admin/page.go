package admin

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/retryring/retryring/lease"
)

//go:embed page.html.tmpl
var pageSource string

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"pct": func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) + "%" },
}).Parse(pageSource))

// barWidth is the width of a ring's bar in SVG units; the page scales it to its column.
const barWidth = 1000.0

// pageModel is what the ring page shows.
type pageModel struct {
	View    RingView
	Now     string
	Refresh int // seconds; 0: no automatic refresh
	Rings   []ringPage
	// LeaderHTTP is the leader's admin address when this node is not the leader (reports and
	// backlog live there); empty otherwise.
	LeaderHTTP string
}

type ringPage struct {
	Name       string
	Generation uint64
	Members    []memberPage
	Bars       []pageBar
	Covered    float64 // percent of the token ring assigned to an active member
	// Backlog is nil on a follower; the texts below are set only with it.
	Backlog      *BacklogView
	Age          string // backlog age for people, or "unknown"
	Executions   []outcomeRate
	DeadLetters  string
	Breakers     []string
	Spark        sparkline
	Controls     *ControlsView
	Movement     *MovementView
	LeaseUnfit   []string
	UnknownCount int
}

type memberPage struct {
	MemberView
	Color     string
	Share     float64 // percent of the token ring
	LeaseLeft string
	Node0     bool
	ShortInc  string
	// ReportText says how old the member's report is; ReportUnknown marks it (only the leader
	// has reports: both are empty on a follower).
	ReportText    string
	ReportUnknown bool
	Pending       string
	DonePerS      string
	// NoControls: the worker did not announce the controls feature, so it cannot obey an impl
	// pause or a rate limit (the leader's view says "controls": false).
	NoControls bool
	// Clock is the member's reported clock offset (ClockText); ClockBeyond marks it untrusted.
	Clock       string
	ClockBeyond bool
}

type outcomeRate struct {
	Outcome string
	Rate    string
}

type pageBar struct {
	X, W  float64
	Color string
	Title string
}

// RenderPage writes the ring page of v as this node sees it at now: history holds the leader's
// backlog samples by ring name (nil on a follower), refresh the seconds after which the page
// reloads itself (0: never).
func RenderPage(w io.Writer, v RingView, history map[string][]BacklogSample, now time.Time, refresh int) error {
	return pageTemplate.Execute(w, buildPage(v, history, now, refresh))
}

// buildPage lays a view out for the page: each member's share and colour, each range as a segment
// of the ring's bar (tokens from -2^63 on the left to 2^63-1 on the right), each ring's backlog
// and its sparkline from history (the leader's samples by ring name).
func buildPage(v RingView, history map[string][]BacklogSample, now time.Time, refresh int) pageModel {
	m := pageModel{View: v, Now: now.UTC().Format("2006-01-02 15:04:05 MST"), Refresh: refresh}
	if v.LeaderID != v.CoordinatorID {
		for _, c := range v.Coordinators {
			if c.ID == v.LeaderID {
				m.LeaderHTTP = c.HTTPAddr
			}
		}
	}
	for _, r := range v.Rings {
		rp := ringPage{Name: r.Region + "/" + r.Cluster + "/" + r.Service, Generation: r.Generation, Controls: &r.Controls, Movement: &r.Movement}
		if r.Backlog != nil {
			layBacklog(&rp, r.Backlog, history[r.Key().String()], now)
		}
		for i, mv := range r.Members {
			mp := memberPage{MemberView: mv, Color: memberColor(i), Node0: mv.NodeIndex == 0 && mv.State == MemberActive, ShortInc: mv.Incarnation}
			mp.NoControls = mv.Controls != nil && !*mv.Controls
			layReport(&mp, mv.Report)
			if len(mp.ShortInc) > 8 {
				mp.ShortInc = mp.ShortInc[:8]
			}
			if mv.LeaseExpiresMs > 0 {
				left := time.UnixMilli(mv.LeaseExpiresMs).Sub(now)
				mp.LeaseLeft = fmt.Sprintf("%d ms", left.Milliseconds())
				if left <= 0 {
					mp.LeaseLeft = "ended"
				}
			}
			rs, err := lease.DecodeRanges(mv.Ranges)
			if err == nil {
				for _, rg := range rs {
					share := rangeShare(rg)
					mp.Share += share
					if mv.State == MemberActive {
						rp.Covered += share
					}
					rp.Bars = append(rp.Bars, pageBar{
						X: tokenX(rg.Start), W: math.Max(share/100*barWidth, 0.5), Color: mp.Color,
						Title: fmt.Sprintf("%s [%d, %d] %s", mv.WorkerID, rg.Start, rg.End, mv.State),
					})
				}
			}
			rp.Members = append(rp.Members, mp)
		}
		m.Rings = append(m.Rings, rp)
	}
	return m
}

// SharePercent is the percentage of the token ring that the wire ranges cover; 0 when they do
// not decode.
func SharePercent(ws []lease.WireRange) float64 {
	rs, err := lease.DecodeRanges(ws)
	if err != nil {
		return 0
	}
	return rs.Fraction() * 100
}

// rangeShare is the percentage of the token ring that rg covers (both ends included).
func rangeShare(rg lease.Range) float64 { return lease.Ranges{rg}.Fraction() * 100 }

// tokenX places a token on the bar: -2^63 at 0, 2^63-1 at barWidth.
func tokenX(t int64) float64 {
	return float64(uint64(t)^(1<<63)) / math.Pow(2, 64) * barWidth
}

// memberColor spreads colours by the golden angle, so that neighbours in join order differ. It
// is a hex colour: html/template lets no parenthesis into a style.
func memberColor(i int) string {
	h := float64((i*137+200)%360) / 60
	const sat, light = 0.6, 0.55
	c := (1 - math.Abs(2*light-1)) * sat
	x := c * (1 - math.Abs(math.Mod(h, 2)-1))
	var r, g, b float64
	switch int(h) {
	case 0:
		r, g, b = c, x, 0
	case 1:
		r, g, b = x, c, 0
	case 2:
		r, g, b = 0, c, x
	case 3:
		r, g, b = 0, x, c
	case 4:
		r, g, b = x, 0, c
	default:
		r, g, b = c, 0, x
	}
	m := light - c/2
	hex := func(v float64) int { return int(math.Round((v + m) * 255)) }
	return fmt.Sprintf("#%02x%02x%02x", hex(r), hex(g), hex(b))
}
