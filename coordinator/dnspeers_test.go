package coordinator

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// testResolver stands in for DNS: it maps host names to IPs, as a Kubernetes headless Service
// maps pod names to pod IPs, and counts the answers it gave per name and IP.
type testResolver struct {
	mu      sync.Mutex
	hosts   map[string]string
	answers map[string]int // "name→ip" → count
}

func (r *testResolver) set(name, ip string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hosts[name] = ip
}

func (r *testResolver) answered(name, ip string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.answers[name+"→"+ip]
}

// lookupHost answers as the test's DNS: each node checks its own --peers entry with it
// (checkSelfPeer).
func (r *testResolver) lookupHost(_ context.Context, host string) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ip, ok := r.hosts[host]; ok {
		return []string{ip}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// dial resolves the host of addr on every dial (no caching, as a client that honours a zero TTL
// would) and dials the IP.
func (r *testResolver) dial(ctx context.Context, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	ip, ok := r.hosts[host]
	if ok {
		r.answers[host+"→"+ip]++
	}
	r.mu.Unlock()
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", net.JoinHostPort(ip, port))
}

// listenBoth returns a listener on 127.0.0.1 and one on other at the same port: the second is
// kept for the node that comes back at the other IP under the same name and port.
func listenBoth(t *testing.T, other string) (net.Listener, net.Listener) {
	t.Helper()
	for range 50 {
		first := listenLoopback(t)
		port := first.Addr().(*net.TCPAddr).Port
		second, err := net.Listen("tcp", net.JoinHostPort(other, strconv.Itoa(port)))
		if err == nil {
			return first, second
		}
		_ = first.Close()
	}
	t.Fatalf("no port free on both 127.0.0.1 and %s", other)
	return nil, nil
}

func listenOn(t *testing.T, ip string) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestPeersByDNSName: a cluster whose --peers name hosts rather than IPs (as the Helm chart's
// StatefulSet does, by the pods' names under a headless Service) forms, keeps the names in the
// Raft configuration, and takes back a node that comes back on its data directory at a new IP
// under the same name: the others find it by resolving the name again. A resolver the test
// controls stands in for DNS, through Config.RaftDial.
func TestPeersByDNSName(t *testing.T) {
	r := &testResolver{hosts: map[string]string{}, answers: map[string]int{}}
	const domain = "coordinators.retryring.test"
	name := func(i int) string { return fmt.Sprintf("c%d.%s", i+1, domain) }

	raftLns := make([]net.Listener, 3)
	raftLns[0], raftLns[1] = listenLoopback(t), listenLoopback(t)
	var comeback net.Listener // c3's Raft listener at its new IP, same port
	raftLns[2], comeback = listenBoth(t, "127.0.0.3")
	t.Cleanup(func() { _ = comeback.Close() })
	peers := make([]Peer, 3)
	for i, l := range raftLns {
		port := l.Addr().(*net.TCPAddr).Port
		peers[i] = Peer{ID: fmt.Sprintf("c%d", i+1), RaftAddr: net.JoinHostPort(name(i), strconv.Itoa(port))}
		r.set(name(i), "127.0.0.1")
	}
	dataDirs := make([]string, 3)
	tc := newCluster(t, 3, func(i int, c *Config) {
		_ = c.RaftListener.Close() // the harness's own, replaced by the one behind the name
		c.RaftListener = raftLns[i]
		c.Peers = peers
		c.RaftDial = r.dial
		c.lookupHost = r.lookupHost
		dataDirs[i] = c.DataDir
	})
	leader := tc.leader()
	f := leader.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	for _, s := range f.Configuration().Servers {
		want := peers[s.ID[1]-'1'].RaftAddr
		if string(s.Address) != want {
			t.Fatalf("Raft configuration holds %s at %s, want the name %s", s.ID, s.Address, want)
		}
	}
	for _, cv := range leader.View().Coordinators {
		if want := peers[cv.ID[1]-'1'].RaftAddr; cv.RaftAddr != want {
			t.Fatalf("ring view: %s raft_addr %s, want %s", cv.ID, cv.RaftAddr, want)
		}
	}

	// c3 dies and comes back at 127.0.0.3 on its data directory: the name now points there.
	old := tc.nodes[2]
	old.Kill()
	r.set(name(2), "127.0.0.3")
	cfg := old.cfg
	cfg.RaftListener = comeback
	cfg.RSocketListener, cfg.HTTPListener = listenOn(t, "127.0.0.3"), listenOn(t, "127.0.0.3")
	cfg.DataDir = dataDirs[2]
	back, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(back.Kill)
	tc.nodes[2] = back

	// leader() waits until every node knows one ready leader and the leader's state holds every
	// node's registration: c3's new RSocket address at 127.0.0.3 included.
	leader = tc.leader()
	for leader == back { // c3 won an election: hand over, so that a leader has to find c3 by name
		if err := back.raft.LeadershipTransfer().Error(); err != nil {
			t.Logf("leadership transfer from c3: %v", err)
		}
		leader = tc.leader()
	}
	if host, _, _ := net.SplitHostPort(back.RSocketAddr()); host != "127.0.0.3" {
		t.Fatalf("c3 came back with RSocket address %s", back.RSocketAddr())
	}
	eventually(t, 10*time.Second, "c3 applied the leader's log", func() bool {
		return back.raft.AppliedIndex() >= leader.raft.CommitIndex()
	})
	if r.answered(name(2), "127.0.0.3") == 0 {
		t.Fatalf("the leader %s replicates to c3 without having resolved %s to its new IP", leader.cfg.NodeID, name(2))
	}

	// The leader dies: the two left, c3 one of them, elect a new one, which needs c3's vote and,
	// for the new term's first entry, c3's acknowledgement.
	leader.Kill()
	if next := tc.leader(); next == leader {
		t.Fatalf("the killed node %s is still the leader", leader.cfg.NodeID)
	}
}
