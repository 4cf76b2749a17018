package demo

import (
	"fmt"
	"io"
	"math"
	"math/big"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/lease"
)

// view is everything one frame of the live progress shows. Building it does the I/O; rendering
// it is pure.
type view struct {
	Now, Started time.Time
	Phase        string
	Keyspace     string
	Ring         lease.RingKey
	// AdminURL is the leader's ring page (GET /); Leader and Term are "" / 0 while none is known.
	AdminURL string
	Leader   string
	Term     uint64
	// Downstream says what the stub answers now.
	Downstream string
	ExecRate   float64
	Ledger     Ledger
	Generation uint64
	Members    []memberRow
	// Coordinators and Workers are the processes ("c1 follower", "w2 killed").
	Coordinators []procRow
	Workers      []procRow
	// MaxWindows bounds the table to the latest windows.
	MaxWindows int
}

type memberRow struct {
	WorkerID  string
	NodeIndex int
	Epoch     uint64
	Share     float64 // fraction of the ring
	Ranges    string
	State     string
	LeaseLeft time.Duration // by the leader's estimate; 0 when unknown
}

type procRow struct {
	Name, State string
}

// members turns a ring's members into rows, in node index order (departed members last).
func members(r admin.RingStateView, now time.Time) []memberRow {
	out := make([]memberRow, 0, len(r.Members))
	for _, m := range r.Members {
		row := memberRow{WorkerID: m.WorkerID, NodeIndex: m.NodeIndex, Epoch: m.Epoch, State: m.State}
		if rs, err := lease.DecodeRanges(m.Ranges); err == nil {
			row.Share = share(rs)
			row.Ranges = shortRanges(rs)
		}
		if m.LeaseExpiresMs > 0 {
			row.LeaseLeft = max(time.UnixMilli(m.LeaseExpiresMs).Sub(now), 0)
		}
		out = append(out, row)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if (a.State == admin.MemberDeparted) != (b.State == admin.MemberDeparted) {
			return b.State == admin.MemberDeparted
		}
		if (a.NodeIndex < 0) != (b.NodeIndex < 0) {
			return b.NodeIndex < 0
		}
		return a.NodeIndex < b.NodeIndex
	})
	return out
}

// ringSize is 2^64, the number of tokens.
var ringSize = new(big.Float).SetMantExp(big.NewFloat(1), 64)

// share is the fraction of the ring that rs covers.
func share(rs lease.Ranges) float64 {
	total := new(big.Int)
	for _, r := range rs {
		total.Add(total, new(big.Int).SetUint64(r.Width()))
		total.Add(total, big.NewInt(1)) // bounds are inclusive
	}
	f, _ := new(big.Float).Quo(new(big.Float).SetInt(total), ringSize).Float64()
	return f
}

// shortRanges writes ranges with tokens in three significant digits.
func shortRanges(rs lease.Ranges) string {
	if len(rs) == 0 {
		return "-"
	}
	parts := make([]string, 0, 2)
	for i, r := range rs {
		if i == 2 {
			parts = append(parts, fmt.Sprintf("+%d more", len(rs)-2))
			break
		}
		parts = append(parts, fmt.Sprintf("[%s, %s]", shortToken(r.Start), shortToken(r.End)))
	}
	return strings.Join(parts, " ")
}

func shortToken(t int64) string {
	if t == 0 {
		return "0"
	}
	return strconv.FormatFloat(float64(t), 'e', 2, 64)
}

// block renders the live frame that a terminal redraws in place.
func block(v view) []string {
	l := v.Ledger
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	add("retryring demo · %s · ring %s · keyspace %s", clock(v.Now.Sub(v.Started)), v.Ring, v.Keyspace)
	if v.AdminURL != "" {
		add("ring page: %s   (leader %s, term %d)", v.AdminURL, v.Leader, v.Term)
	} else {
		add("ring page: (no leader known right now)")
	}
	add("now: %s", v.Phase)
	add("downstream: %s · %s executions/s", v.Downstream, num(int(math.Round(v.ExecRate))))
	add("")
	add("drain %s %5.1f%%  %s of %s finished (done %s, dead-lettered %s)",
		bar(l.Fraction(), 30), 100*l.Fraction(), num(l.Finished()), num(l.Recorded), num(l.Done), num(l.DeadLettered))
	add("")
	add("%-18s %-9s %9s %9s %9s %9s %14s", "window (UTC)", "opens", "recorded", "pending", "done", "retried", "dead-lettered")
	rows := l.Windows
	if v.MaxWindows > 0 && len(rows) > v.MaxWindows {
		rows = rows[len(rows)-v.MaxWindows:]
	}
	for _, r := range rows {
		add("%-18s %-9s %9s %9s %9s %9s %14s", windowName(r), opens(r, v.Now),
			num(r.Recorded), num(r.Pending), num(r.Done), num(r.Retried), num(r.DeadLettered))
	}
	if len(rows) == 0 {
		add("(nothing recorded yet)")
	}
	add("")
	add("ring generation %d: which worker holds which tokens (from the leader's view)", v.Generation)
	for _, m := range v.Members {
		node := fmt.Sprintf("node %d", m.NodeIndex)
		if m.NodeIndex < 0 {
			node = "joining"
		}
		left := ""
		if m.LeaseLeft > 0 {
			left = fmt.Sprintf("lease %.1fs", m.LeaseLeft.Seconds())
		}
		add("  %-4s %-8s epoch %-4d %5.1f%%  %-42s %-9s %s", m.WorkerID, node, m.Epoch, 100*m.Share, m.Ranges, m.State, left)
	}
	if len(v.Members) == 0 {
		add("  (no members)")
	}
	add("processes: %s", procs(append(append([]procRow(nil), v.Coordinators...), v.Workers...)))
	return out
}

// line renders the frame as one line, for output that is not a terminal.
func line(v view) string {
	l := v.Ledger
	pending, retried := 0, 0
	for _, r := range l.Windows {
		pending += r.Pending
		retried += r.Retried
	}
	var ms []string
	for _, m := range v.Members {
		ms = append(ms, fmt.Sprintf("%s %.0f%%", m.WorkerID, 100*m.Share))
	}
	leader := "none"
	if v.Leader != "" {
		leader = fmt.Sprintf("%s (term %d)", v.Leader, v.Term)
	}
	return fmt.Sprintf("[%s] %s | drain %.1f%% finished %s/%s (done %s, dead-lettered %s) pending %s retried %s | downstream %s | leader %s | ring %s",
		clock(v.Now.Sub(v.Started)), v.Phase, 100*l.Fraction(), num(l.Finished()), num(l.Recorded), num(l.Done),
		num(l.DeadLettered), num(pending), num(retried), v.Downstream, leader, strings.Join(ms, ", "))
}

// windowLines renders the per-window table as plain lines.
func windowLines(l Ledger, now time.Time) []string {
	var out []string
	for _, r := range l.Windows {
		out = append(out, fmt.Sprintf("  window %s (%s): recorded %s, pending %s, done %s, retried %s, dead-lettered %s",
			windowName(r), opens(r, now), num(r.Recorded), num(r.Pending), num(r.Done), num(r.Retried), num(r.DeadLettered)))
	}
	return out
}

func windowName(r WindowRow) string {
	return r.Window.Start().UTC().Format("2006-01-02 15:04")
}

func opens(r WindowRow, now time.Time) string {
	if r.Open(now) {
		return "open"
	}
	return "in " + clock(r.Opens.Sub(now).Round(time.Second))
}

func procs(rs []procRow) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.Name + " " + r.State
	}
	return strings.Join(parts, " · ")
}

// bar draws a progress bar of width cells.
func bar(fraction float64, width int) string {
	fraction = min(max(fraction, 0), 1)
	full := int(math.Floor(fraction * float64(width)))
	return "[" + strings.Repeat("█", full) + strings.Repeat("░", width-full) + "]"
}

// clock writes d as m:ss (h:mm:ss from an hour on).
func clock(d time.Duration) string {
	d = max(d, 0).Round(time.Second)
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	if h > 0 {
		return fmt.Sprintf("%d:%02d:%02d", h, m, s)
	}
	return fmt.Sprintf("%d:%02d", m, s)
}

// num writes n with thousands separators.
func num(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// screen writes frames and events. On a terminal it redraws the frame in place and prints
// events above it, so they stay in the scrollback; otherwise it prints events and one status
// line per frame.
type screen struct {
	out     io.Writer
	tty     bool
	started time.Time

	mu      sync.Mutex
	events  []string
	drawn   int // lines of the frame on the terminal now
	history []Event
}

// Event is something the demo did or saw, at a time since the run started.
type Event struct {
	At   time.Duration
	Text string
}

func newScreen(out io.Writer, d Display, started time.Time) *screen {
	tty := d == DisplayTTY
	if d == DisplayAuto {
		tty = isTerminal(out)
	}
	return &screen{out: out, tty: tty, started: started}
}

// isTerminal reports whether out is a character device and TERM is not "dumb".
func isTerminal(out io.Writer) bool {
	f, ok := out.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// event queues a line for the next frame and keeps it for the summary.
func (s *screen) event(now time.Time, format string, args ...any) {
	e := Event{At: now.Sub(s.started), Text: fmt.Sprintf(format, args...)}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.history = append(s.history, e)
	s.events = append(s.events, fmt.Sprintf("[%s] %s", clock(e.At), e.Text))
}

// say prints lines at once, above the frame.
func (s *screen) say(lines ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clear()
	for _, l := range lines {
		fmt.Fprintln(s.out, l)
	}
	s.drawn = 0
}

// frame prints the queued events, then the frame.
func (s *screen) frame(v view) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clear()
	for _, e := range s.events {
		fmt.Fprintln(s.out, e)
	}
	s.events = s.events[:0]
	if !s.tty {
		fmt.Fprintln(s.out, line(v))
		return
	}
	lines := block(v)
	for _, l := range lines {
		fmt.Fprintln(s.out, "\x1b[2K"+l)
	}
	s.drawn = len(lines)
}

// release leaves the last frame on the terminal: what follows is printed below it.
func (s *screen) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.events {
		fmt.Fprintln(s.out, e)
	}
	s.events = s.events[:0]
	s.drawn = 0
}

// clear erases the frame on the terminal (the cursor goes back to its first line).
func (s *screen) clear() {
	if s.tty && s.drawn > 0 {
		fmt.Fprintf(s.out, "\x1b[%dA\r\x1b[J", s.drawn)
	}
	s.drawn = 0
}

// Events returns every event so far.
func (s *screen) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Event(nil), s.history...)
}
