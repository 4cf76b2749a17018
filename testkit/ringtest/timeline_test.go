package ringtest

import (
	"testing"
	"time"
)

// TestTimelineInstants checks that the instants the tests read come in causal order: a crash,
// then the leader noticing it, then the dead worker's ranges usable by the others; a leave, then
// its ranges taken over; a leader kill, then every stream resumed. It asserts no duration.
func TestTimelineInstants(t *testing.T) {
	c := NewCluster(t, Options{})
	a, b, d := c.AddWorker("a"), c.AddWorker("b"), c.AddWorker("d")
	c.WaitSettled(settleWait)

	b.Stop()
	stopped, _ := c.Last(EventWorkerStopped, "b")
	down, err := c.WaitMemberDown(b, settleWait)
	if err != nil {
		t.Fatal(err)
	}
	taken, err := c.WaitTakeover(b, stopped.At, settleWait)
	if err != nil {
		t.Fatal(err)
	}
	if down < stopped.At || taken < down {
		t.Fatalf("crash at %v, detected at %v, taken over at %v: out of order", stopped.At, down, taken)
	}
	c.WaitSettled(settleWait)

	if err := d.Leave(); err != nil {
		t.Fatal(err)
	}
	leaving, _ := c.Last(EventWorkerLeaving, "d")
	usable, err := c.WaitTakeover(d, leaving.At, settleWait)
	if err != nil {
		t.Fatal(err)
	}
	if usable < leaving.At {
		t.Fatalf("leave at %v, ranges usable by others at %v", leaving.At, usable)
	}
	c.WaitSettled(settleWait)

	c.KillLeader()
	killed, _ := c.Last(EventCoordKilled, "")
	c.WaitReady(settleWait)
	resumed, err := c.WaitInstallAfter(a, killed.At, settleWait)
	if err != nil {
		t.Fatal(err)
	}
	if resumed < killed.At {
		t.Fatalf("stream resumed at %v before the kill at %v", resumed, killed.At)
	}
	c.WaitSettled(settleWait)
	c.CheckHistory()
	t.Logf("detection %v, takeover %v, leave-to-usable %v, leader-kill-to-stream %v",
		(down - stopped.At).Round(time.Millisecond), (taken - stopped.At).Round(time.Millisecond),
		(usable - leaving.At).Round(time.Millisecond), (resumed - killed.At).Round(time.Millisecond))
}

// TestCheckerCatchesAStaleHolderInARealHistory feeds the checker a real history in which one
// interval is stretched, as if a crashed worker had kept using its ranges past the takeover: the
// checker must see the overlap (and, for Node-0, the second Node-0) in data recorded from a cluster.
func TestCheckerCatchesAStaleHolderInARealHistory(t *testing.T) {
	c := NewCluster(t, Options{})
	a := c.AddWorker("a")
	c.AddWorker("b")
	c.WaitSettled(settleWait)
	a.Stop()
	stopped, _ := c.Last(EventWorkerStopped, "a")
	if _, err := c.WaitTakeover(a, stopped.At, settleWait); err != nil {
		t.Fatal(err)
	}
	c.WaitSettled(settleWait)
	h := c.Recorder().History()
	if vs := Check(h); len(vs) != 0 {
		t.Fatalf("the real history already has violations:%s", FormatViolations(vs, 10))
	}
	ended, _ := c.Last(EventEnd, "a")
	stretched := false
	for i, iv := range h.Intervals {
		if iv.Holder() == a.Holder() && iv.To == ended.At {
			h.Intervals[i].To = c.Now() // the crashed process keeps going
			stretched = true
		}
	}
	if !stretched {
		t.Fatalf("no interval of %s ends at its crash (%v)", a.Holder(), ended.At)
	}
	vs := CheckExclusive(h.Intervals)
	if len(vs) == 0 {
		t.Fatal("the checker missed a crashed worker still using its ranges after the takeover")
	}
	t.Logf("caught: %v", vs[0])
}
