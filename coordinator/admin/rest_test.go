package admin

import (
	"strings"
	"testing"

	"github.com/retryring/retryring/lease"
)

func restMember(id, inc string, index int, rs ...lease.Range) MemberView {
	return MemberView{WorkerID: id, Incarnation: inc, NodeIndex: index, State: MemberActive,
		Ranges: lease.EncodeRanges(lease.Normalize(rs))}
}

// TestAtRestNamesWhatIsNotSo: a ring tiled by exactly the running workers is at rest; every way a
// ring on its way differs from that is refused with a reason naming it.
func TestAtRestNamesWhatIsNotSo(t *testing.T) {
	halves := lease.Split(2)
	workers := map[string]string{"w1": "", "w2": "i2"}
	ring := func(ms ...MemberView) RingStateView { return RingStateView{Members: ms} }
	w1, w2 := restMember("w1", "i1", 0, halves[0]), restMember("w2", "i2", 1, halves[1])
	if err := ring(w1, w2).AtRest(workers); err != nil {
		t.Fatalf("a settled ring refused: %v", err)
	}
	// Node indexes need not follow the token order (the minimal mode keeps them stable).
	if err := ring(restMember("w1", "i1", 1, halves[0]), restMember("w2", "i2", 0, halves[1])).AtRest(workers); err != nil {
		t.Fatalf("a settled ring with swapped indexes refused: %v", err)
	}
	if err := ring().AtRest(map[string]string{}); err != nil {
		t.Fatalf("an empty ring with no workers refused: %v", err)
	}
	departed := w2
	departed.State = MemberDeparted
	joining := restMember("w2", "i2", -1)
	joining.State = MemberJoining
	cases := []struct {
		name string
		ring RingStateView
		want string
	}{
		{"a gap", ring(w1, restMember("w2", "i2", 1, lease.Range{Start: halves[1].Start + 1, End: lease.MaxToken})), "not the whole ring"},
		{"an overlap", ring(restMember("w1", "i1", 0, lease.FullRing), w2), "overlaps"},
		{"a worker missing", ring(restMember("w1", "i1", 0, lease.FullRing)), "1 of 2 workers"},
		{"a stranger", ring(w1, w2, restMember("w3", "i3", 2)), "not one of the 2 workers"},
		{"an old incarnation", ring(w1, restMember("w2", "old", 1, halves[1])), "not the running"},
		{"a departed member", ring(w1, departed), "is departed"},
		{"a joining member", ring(w1, joining), "is joining"},
		{"a member twice", ring(w1, w2, restMember("w2", "i2", 2)), "twice"},
		{"two Node-0", ring(w1, restMember("w2", "i2", 0, halves[1])), "both node 0"},
		{"an index past the count", ring(w1, restMember("w2", "i2", 2, halves[1])), "node 2 of 2"},
	}
	for _, c := range cases {
		err := c.ring.AtRest(workers)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}
