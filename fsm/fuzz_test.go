package fsm_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/retryring/retryring/fsm"
)

// FuzzReadSnapshot reads any bytes as a snapshot, as a node restoring one does (a snapshot comes
// from the node's own disk or from the leader's InstallSnapshot). Nothing may panic: not the read,
// and not what a node does next with the state it restored (clone it, join a worker to each ring,
// expire what is held, plan and assign). A refusal says it is the snapshot; an accepted state writes back to a snapshot that
// reads as the same state. Seeds: snapshots of the states the tests build, of every format, and
// damaged ones (testdata/fuzz/FuzzReadSnapshot).
func FuzzReadSnapshot(f *testing.F) {
	base := fuzzBase(f)
	withControls := base.Clone()
	mustApply(f, withControls, &fsm.Pause{Ring: ringA, Impl: []string{"payment"}, Reason: "down", AtMs: 1})
	mustApply(f, withControls, &fsm.Limit{Ring: ringB, PerSecond: 12.5, AtMs: 2})
	mustApply(f, withControls, &fsm.CommitTiming{Timing: timing10s})
	for _, s := range []*fsm.State{fsm.NewState(), base, withControls} {
		snap := stateJSON(f, s)
		f.Add([]byte(snap))
		f.Add([]byte(snap[:len(snap)/2]))
	}
	for v := range fsm.Version + 2 {
		f.Add(fmt.Appendf(nil, `{"format":%d,"state":{}}`, v))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := fsm.ReadSnapshot(bytes.NewReader(data))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fsm: read snapshot") {
				t.Fatalf("refused with %v: does not say it is the snapshot", err)
			}
			return
		}
		snap := stateJSON(t, st)
		again, err := fsm.ReadSnapshot(strings.NewReader(snap))
		if err != nil {
			t.Fatalf("the snapshot of a restored state does not read: %v\n%s", err, snap)
		}
		if got := stateJSON(t, again); got != snap {
			t.Fatalf("a restored state does not survive a snapshot:\n%s\n%s", snap, got)
		}
		if got := stateJSON(t, st.Clone()); got != snap {
			t.Fatalf("a clone differs:\n%s\n%s", snap, got)
		}
		for _, r := range st.Rings {
			_ = r.Settled()
			s := st.Clone()
			_ = s.Apply(&fsm.Join{Ring: r.Key, WorkerID: "Z", Incarnation: "z1"})
			rr := s.Ring(r.Key)
			for _, h := range fsm.PendingHolds(rr) {
				_ = s.Apply(&fsm.Expire{Ring: r.Key, WorkerID: h.WorkerID, Incarnation: h.Incarnation, UpTo: h.Epoch, Generation: rr.Generation})
			}
			if plan := fsm.Plan(s.Ring(r.Key)); plan != nil {
				_ = s.Apply(plan)
			}
		}
	})
}
