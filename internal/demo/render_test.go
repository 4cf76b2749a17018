package demo

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/lease"
)

func TestNum(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 20000: "20,000", 1234567: "1,234,567", -4500: "-4,500"} {
		if got := num(n); got != want {
			t.Errorf("num(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestClockAndBar(t *testing.T) {
	if got := clock(83 * time.Second); got != "1:23" {
		t.Errorf("clock = %q", got)
	}
	if got := clock(-time.Second); got != "0:00" {
		t.Errorf("negative clock = %q", got)
	}
	if got := bar(0.5, 10); got != "[█████░░░░░]" {
		t.Errorf("bar = %q", got)
	}
	if got := bar(1.7, 4); got != "[████]" {
		t.Errorf("bar over 1 = %q", got)
	}
}

func TestShareOfSplitRing(t *testing.T) {
	var total float64
	for _, r := range lease.Split(3) {
		s := share(lease.Ranges{r})
		if math.Abs(s-1.0/3) > 1e-9 {
			t.Errorf("share of %v = %v", r, s)
		}
		total += s
	}
	if math.Abs(total-1) > 1e-12 {
		t.Errorf("shares add up to %v", total)
	}
	if s := share(lease.Ranges{lease.FullRing}); s != 1 {
		t.Errorf("full ring share %v", s)
	}
}

func sampleView(t *testing.T) view {
	w1 := mustWindow(t, t0)
	splits := lease.Split(3)
	ring := admin.RingStateView{Generation: 4}
	for i, id := range []string{"w1", "w2", "w3"} {
		ring.Members = append(ring.Members, admin.MemberView{
			WorkerID: id, NodeIndex: 2 - i, Epoch: uint64(3 + i), State: admin.MemberActive,
			Ranges: lease.EncodeRanges(lease.Ranges{splits[2-i]}), LeaseExpiresMs: t0.Add(2 * time.Second).UnixMilli(),
		})
	}
	return view{
		Now: t0, Started: t0.Add(-83 * time.Second), Phase: "draining", Keyspace: "demo_x", Ring: DefaultRing,
		AdminURL: "http://127.0.0.1:7201/v1/ring", Leader: "c2", Term: 3, Downstream: "200 OK", ExecRate: 812.4,
		Ledger: Ledger{
			Recorded: 20000, Done: 9000, DeadLettered: 50, Lost: 10950,
			Windows: []WindowRow{{Window: w1, Recorded: 20000, Pending: 6950, Done: 9000, Retried: 4000, DeadLettered: 50, Opens: w1.Start().Add(2 * time.Second)}},
		},
		Generation: 4, Members: members(ring, t0),
		Coordinators: []procRow{{"c1", "follower"}, {"c2", "leader"}, {"c3", "killed"}},
		Workers:      []procRow{{"w1", "running"}},
		MaxWindows:   tableWindows,
	}
}

func TestBlockShowsWhatTheBriefAsksFor(t *testing.T) {
	out := strings.Join(block(sampleView(t)), "\n")
	for _, want := range []string{
		"1:23", "http://127.0.0.1:7201/v1/ring", "leader c2, term 3", "45.2%", "9,050 of 20,000 finished",
		"recorded", "pending", "done", "retried", "dead-lettered", "2026-03-14 10:00", "6,950", "4,000",
		"w3   node 0", "33.3%", "lease 2.0s", "c3 killed", "812 executions/s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("frame lacks %q:\n%s", want, out)
		}
	}
	// Node 0 first.
	if strings.Index(out, "w3   node 0") > strings.Index(out, "w1   node 2") {
		t.Errorf("members not in node order:\n%s", out)
	}
}

func TestLineIsOneLine(t *testing.T) {
	l := line(sampleView(t))
	if strings.Contains(l, "\n") || strings.Contains(l, "\x1b") {
		t.Fatalf("plain line has a newline or an escape: %q", l)
	}
	for _, want := range []string{"[1:23]", "drain 45.2%", "pending 6,950", "retried 4,000", "leader c2 (term 3)", "w3 33%"} {
		if !strings.Contains(l, want) {
			t.Errorf("line lacks %q: %s", want, l)
		}
	}
}

func TestScreenRedrawsInPlaceOnlyOnATerminal(t *testing.T) {
	v := sampleView(t)
	var plain bytes.Buffer
	s := newScreen(&plain, DisplayPlain, v.Started)
	s.event(v.Now, "kill -9 worker %s", "w2")
	s.frame(v)
	s.frame(v)
	if strings.Contains(plain.String(), "\x1b") {
		t.Errorf("plain output has escapes: %q", plain.String())
	}
	if got := strings.Count(plain.String(), "\n"); got != 3 {
		t.Errorf("plain output: %d lines, want an event and two status lines:\n%s", got, plain.String())
	}
	if !strings.HasPrefix(plain.String(), "[1:23] kill -9 worker w2\n") {
		t.Errorf("event line: %q", plain.String())
	}

	var tty bytes.Buffer
	s = newScreen(&tty, DisplayTTY, v.Started)
	s.frame(v)
	n := len(block(v))
	tty.Reset()
	s.event(v.Now, "kill -9 coordinator leader c2")
	s.frame(v)
	out := tty.String()
	if !strings.HasPrefix(out, "\x1b["+strconv.Itoa(n)+"A\r\x1b[J[1:23] kill -9 coordinator leader c2\n") {
		t.Errorf("second frame does not erase the first and print the event above: %q", out[:min(len(out), 80)])
	}
	if len(s.Events()) != 1 || s.Events()[0].Text != "kill -9 coordinator leader c2" {
		t.Errorf("events kept: %+v", s.Events())
	}
}

func TestSummaryExplainsExecutedTwice(t *testing.T) {
	base := Summary{Recorded: 100, Done: 99, DeadLettered: 1, Concurrency: 32, Drained: true, DrainTime: 61 * time.Second,
		ByStatus: map[int]int{200: 99, 422: 1}, Executions: 100}
	cases := []struct {
		name string
		mod  func(*Summary)
		want string
	}{
		{"graceful", func(*Summary) {}, "none (no worker was killed"},
		{"within bound", func(s *Summary) { s.Killed, s.ExecutedTwice, s.InFlightAtKill = "w2", 3, 5 }, "at most the rows w2 had in flight"},
		{"killed, none twice", func(s *Summary) { s.Killed, s.InFlightAtKill = "w1", 4 }, "none this time; after a kill -9 it may be up to"},
		{"above bound", func(s *Summary) { s.Killed, s.ExecutedTwice = "w2", 33 }, "UNEXPECTED: more than the 32 rows"},
		{"without a kill", func(s *Summary) { s.ExecutedTwice = 1 }, "UNEXPECTED: no worker was killed"},
	}
	for _, c := range cases {
		s := base
		c.mod(&s)
		out := strings.Join(s.Lines(), "\n")
		if !strings.Contains(out, c.want) {
			t.Errorf("%s: summary lacks %q:\n%s", c.name, c.want, out)
		}
		if !strings.Contains(out, "time to drain       1m1s   from the first window opening") {
			t.Errorf("%s: no time to drain:\n%s", c.name, out)
		}
	}
}

func TestSummaryLostAndLeftover(t *testing.T) {
	s := newSummary(Ledger{Recorded: 10, Done: 7, DeadLettered: 1, Lost: 2, ByStatus: map[int]int{}})
	s.Leftover = Leftover{Rows: 3, RowsNotOpen: 3}
	s.Drained = true // the note on rows in windows not open yet is about copies after a drain
	out := strings.Join(s.Lines(), "\n")
	for _, want := range []string{"lost                   2   recorded − done − dead-lettered — NOT done", "3 rows wait in windows not open yet", "skips each committed one by its marker"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	s.LeftoverErr = errors.New("boom")
	if out := strings.Join(s.Lines(), "\n"); !strings.Contains(out, "could not be read: boom") {
		t.Errorf("leftover error not shown:\n%s", out)
	}
}

func TestSummaryOfAnInterruptedRun(t *testing.T) {
	s := newSummary(Ledger{Recorded: 10, Done: 4, Lost: 6, ByStatus: map[int]int{}})
	s.Interrupted = true
	s.Leftover = Leftover{Rows: 6, RowsNotOpen: 6}
	out := strings.Join(s.Lines(), "\n")
	for _, want := range []string{"unfinished             6", "interrupted before the drain ended"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"lost ", "NOT done", "COMMITTED marker"} {
		if strings.Contains(out, bad) {
			t.Errorf("an interrupted run's summary says %q:\n%s", bad, out)
		}
	}
}
