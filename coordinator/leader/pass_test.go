package leader

import (
	"errors"
	"slices"
	"testing"

	"github.com/retryring/retryring/fsm"
)

// BuildPass refuses a release the state refuses, with the state's error, and keeps it out of
// the entry; of two joins of one worker id it keeps the last; it leaves out what was proposed
// moments ago; and it plans on the state the kept parts produce.
func TestBuildPass(t *testing.T) {
	r := &fsm.Ring{Key: testRing, Members: map[string]*fsm.Member{}}
	unknown := fsm.Release{Ring: testRing, WorkerID: "ghost", Incarnation: "g1", Epoch: 1}
	d := RingDecisions{Joins: []fsm.Join{
		{Ring: testRing, WorkerID: "a", Incarnation: "a1"},
		{Ring: testRing, WorkerID: "a", Incarnation: "a2"},
		{Ring: testRing, WorkerID: "b", Incarnation: "b1"},
		{Ring: testRing, WorkerID: "c", Incarnation: "c1"},
	}}
	recent := func(c fsm.Command) bool { j, ok := c.(*fsm.Join); return !ok || j.WorkerID != "c" }
	p, refused := BuildPass(r, []fsm.Release{unknown}, d, recent)
	if len(refused) != 1 || refused[0].Release != 0 || !errors.Is(refused[0].Err, fsm.ErrUnknownMember) {
		t.Fatalf("refused %+v, want the release of an unknown member refused with ErrUnknownMember", refused)
	}
	want := []fsm.MemberRef{{WorkerID: "a", Incarnation: "a2"}, {WorkerID: "b", Incarnation: "b1"}}
	if len(p.Entry.Releases) != 0 || len(p.Releases) != 0 || !slices.Equal(p.Entry.Joins, want) || len(p.Parts) != 2 {
		t.Fatalf("entry %+v (parts %d), want joins %v and nothing else", p.Entry, len(p.Parts), want)
	}
	if len(p.Entry.Assignments) != 2 || p.Entry.Assignments[0].WorkerID != "a" || p.Entry.Assignments[1].WorkerID != "b" {
		t.Fatalf("plan %+v, want a and b on the ring as the joins leave it", p.Entry.Assignments)
	}
	s := fsm.NewState()
	if err := s.Apply(p.Command()); err != nil {
		t.Fatalf("the entry is refused: %v", err)
	}
	if !s.Ring(testRing).Settled() {
		t.Fatalf("one entry did not settle the ring: %+v", s.Ring(testRing))
	}

	// c joins: a and b shrink. b releases its new epoch (kept, before the plan that uses it); a
	// releases an epoch it never had (refused with the state's error, left out).
	apply(t, s, &fsm.Join{Ring: testRing, WorkerID: "c", Incarnation: "c1"})
	apply(t, s, fsm.Plan(s.Ring(testRing)))
	b := s.Ring(testRing).Members[fsm.MemberKey("b", "b1")]
	good := fsm.Release{Ring: testRing, WorkerID: "b", Incarnation: "b1", Epoch: b.Epoch}
	bad := fsm.Release{Ring: testRing, WorkerID: "a", Incarnation: "a2", Epoch: 99}
	p, refused = BuildPass(s.Ring(testRing).Clone(), []fsm.Release{bad, good}, RingDecisions{}, nil)
	if len(refused) != 1 || refused[0].Release != 0 || !errors.Is(refused[0].Err, fsm.ErrBadEpoch) {
		t.Fatalf("refused %+v, want the release of epoch 99 refused with ErrBadEpoch", refused)
	}
	if !slices.Equal(p.Releases, []int{1}) || len(p.Entry.Releases) != 1 || len(p.Entry.Assignments) == 0 {
		t.Fatalf("entry %+v (releases %v), want b's release and the plan it allows", p.Entry, p.Releases)
	}
	if err := s.Apply(p.Command()); err != nil {
		t.Fatalf("the entry is refused: %v", err)
	}
}
