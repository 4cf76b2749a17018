package admin

import (
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/lease"
)

// TestBuildPageLaysTheRingOut: each member's share and segments follow its ranges, Node-0 is the
// active member with index 0, and coverage counts active members only.
func TestBuildPageLaysTheRingOut(t *testing.T) {
	halves := lease.Split(2)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	v := RingView{CoordinatorID: "c1", LeaderID: "c1", Rings: []RingStateView{{
		Region: "eu", Cluster: "prod", Service: "orders", Generation: 4, Members: []MemberView{
			{WorkerID: "w1", Incarnation: "0123456789abcdef", NodeIndex: 0, Epoch: 3, State: MemberActive,
				Ranges: lease.EncodeRanges(lease.Ranges{halves[0]}), LeaseExpiresMs: now.Add(1500 * time.Millisecond).UnixMilli()},
			{WorkerID: "w2", Incarnation: "i2", NodeIndex: 1, Epoch: 3, State: MemberActive,
				Ranges: lease.EncodeRanges(lease.Ranges{halves[1]}), LeaseExpiresMs: now.Add(-time.Second).UnixMilli()},
			{WorkerID: "w3", Incarnation: "i3", NodeIndex: -1, State: MemberDeparted,
				Ranges: lease.EncodeRanges(lease.Ranges{halves[1]})},
		},
	}}}
	m := buildPage(v, nil, now, 2)
	if len(m.Rings) != 1 {
		t.Fatalf("rings %+v", m.Rings)
	}
	r := m.Rings[0]
	if r.Name != "eu/prod/orders" || r.Generation != 4 || r.Covered < 99.99 || r.Covered > 100.01 {
		t.Errorf("ring %s gen %d covered %.3f%%; want eu/prod/orders, 4, 100%%", r.Name, r.Generation, r.Covered)
	}
	w1, w2, w3 := r.Members[0], r.Members[1], r.Members[2]
	if !w1.Node0 || w2.Node0 || w3.Node0 {
		t.Errorf("Node-0 flags %v %v %v; want w1 only", w1.Node0, w2.Node0, w3.Node0)
	}
	if w1.Share < 49.99 || w1.Share > 50.01 || w2.Share < 49.99 || w2.Share > 50.01 {
		t.Errorf("shares %.3f %.3f; want 50%% each", w1.Share, w2.Share)
	}
	if w1.LeaseLeft != "1500 ms" || w2.LeaseLeft != "ended" || w3.LeaseLeft != "" || w1.ShortInc != "01234567" {
		t.Errorf("lease left %q %q %q, incarnation %q", w1.LeaseLeft, w2.LeaseLeft, w3.LeaseLeft, w1.ShortInc)
	}
	if len(r.Bars) != 3 || r.Bars[0].X != 0 || r.Bars[1].X < 499.9 || r.Bars[1].X > 500.1 || r.Bars[0].W < 499.9 || r.Bars[0].W > 500.1 {
		t.Errorf("bars %+v; want w1 on [0, 500), w2 and w3 from 500", r.Bars)
	}
	if w1.Color == w2.Color || !strings.HasPrefix(w1.Color, "#") || len(w1.Color) != 7 {
		t.Errorf("colours %q %q; want distinct #rrggbb", w1.Color, w2.Color)
	}
}

func TestRingViewFindsARingByKey(t *testing.T) {
	v := RingView{Rings: []RingStateView{
		{Region: "eu", Cluster: "c1", Service: "orders", Generation: 1},
		{Region: "eu", Cluster: "c1", Service: "payments", Generation: 2},
	}}
	if r, ok := v.Ring(lease.RingKey{Region: "eu", Cluster: "c1", Service: "payments"}); !ok || r.Generation != 2 {
		t.Errorf("payments: %+v, %v", r, ok)
	}
	if _, ok := v.Ring(lease.RingKey{Region: "us", Cluster: "c1", Service: "orders"}); ok {
		t.Error("found a ring of another region")
	}
}
