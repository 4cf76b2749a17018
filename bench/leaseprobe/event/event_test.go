package event

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/retryring/retryring/lease"
)

func TestALeaseEventRoundTrips(t *testing.T) {
	from := time.Unix(100, 5)
	l := lease.Lease{WorkerID: "p1", NodeIndex: 0, NodeCount: 2, Epoch: 7, Generation: 3,
		Ranges: lease.Ranges{lease.Split(2)[0]}, TTL: 3 * time.Second, ValidFrom: from}
	e := FromLease(l, time.Unix(100, 9))
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := Parse(b)
	if !ok || got.Kind != Lease || got.AtNs != time.Unix(100, 9).UnixNano() || got.Epoch != 7 ||
		got.ExpiresAtNs != from.Add(3*time.Second).UnixNano() {
		t.Fatalf("got %+v %v", got, ok)
	}
	rs, err := got.LeaseRanges()
	if err != nil || !rs.Equal(l.Ranges) {
		t.Fatalf("ranges %v %v", rs, err)
	}
}

func TestLogLinesAreNotEvents(t *testing.T) {
	for _, line := range []string{
		`{"level":"warn","message":"lease stream ended, reconnecting"}`,
		``,
		`{"probe_ev":`,
		`not json "probe_ev": at all`,
	} {
		if _, ok := Parse([]byte(line)); ok {
			t.Errorf("%q parsed as an event", line)
		}
	}
}
