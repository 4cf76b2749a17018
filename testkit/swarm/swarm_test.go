package swarm_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/retryring/retryring/testkit/ringtest"
	"github.com/retryring/retryring/testkit/swarm"
)

// TestSwarmOnARealCluster: members told only of a follower reach the leader through its
// not_leader redirect (the log counts name the leader's address), every ring settles with the
// members' guards holding what the leader assigned, every element came from the leader, and no
// two members of a ring overlap.
func TestSwarmOnARealCluster(t *testing.T) {
	c := ringtest.NewCluster(t, ringtest.Options{})
	l := c.Leader()
	follower := c.Coordinator((l.Index + 1) % len(c.Coordinators()))
	s, err := swarm.New(swarm.Config{Workers: 6, Rings: 2, Coordinators: []string{follower.RSocketAddr()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	if got := len(s.Rings()); got != 2 || s.Members()[3].Ring != s.Rings()[1] {
		t.Fatalf("rings %v, member 3 in %v: want 2 rings, member i in ring i mod 2", s.Rings(), s.Members()[3].Ring)
	}
	var why string
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ok bool
		if ok, why = s.Settled(l.View(), time.Now()); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled within 30 s: %s", why)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cnt := s.Counters()
	if cnt.RedirectsTo[l.RSocketAddr()] < 6 || cnt.Redirects < 6 {
		t.Errorf("counters %+v: want at least one redirect to the leader %s per member", cnt, l.RSocketAddr())
	}
	h := s.History()
	total, by := h.Elements(time.Time{}, time.Now())
	if total == 0 || by[l.RSocketAddr()] != total {
		t.Errorf("elements by coordinator %v, want all %d from the leader %s", by, total, l.RSocketAddr())
	}
	if vs := h.Overlaps(time.Now()); len(vs) != 0 {
		t.Errorf("overlaps %v", vs)
	}
}

// TestLogCountsFollowTheLeaseClient: a member whose only coordinator refuses connections shows as
// sessions ended at that address. It fails if the lease client renames the log line counted.
func TestLogCountsFollowTheLeaseClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	s, err := swarm.New(swarm.Config{Workers: 1, Coordinators: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	deadline := time.Now().Add(15 * time.Second)
	for s.Counters().SessionsEnded[addr] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no ended session counted at %s: counters %+v", addr, s.Counters())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.Start(context.Background()); !errors.Is(err, swarm.ErrStarted) {
		t.Errorf("a second Start: %v, want ErrStarted", err)
	}
	if h := s.History(); len(h.Members[0].Installs) != 0 {
		t.Errorf("installs %v without a coordinator", h.Members[0].Installs)
	}
}

func TestConfigIsChecked(t *testing.T) {
	for _, cfg := range []swarm.Config{
		{Workers: 0, Coordinators: []string{"127.0.0.1:1"}},
		{Workers: 5, Rings: 6, Coordinators: []string{"127.0.0.1:1"}},
		{Workers: 5},
	} {
		if _, err := swarm.New(cfg); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
	if _, err := swarm.New(swarm.Config{Workers: 2, Coordinators: []string{"no port"}}); err == nil {
		t.Error("a coordinator address without a port accepted")
	}
}
