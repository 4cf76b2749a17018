package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// joinerConfig is the config of a node that joins through join on fresh listeners (raftLn when
// given) and an empty data directory unless dir is given.
func joinerConfig(t *testing.T, id, dir string, raftLn net.Listener, join ...string) Config {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	if raftLn == nil {
		raftLn = listenLoopback(t)
	}
	return Config{NodeID: id, DataDir: dir, Join: join, Timing: testTiming, NoSync: true, Logger: testLogger(t),
		RaftListener: raftLn, RSocketListener: listenLoopback(t), HTTPListener: listenLoopback(t)}
}

func startNode(t *testing.T, cfg Config) *Node {
	t.Helper()
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Kill)
	return n
}

// awaitFailed waits for n to report that it stopped working on its own (a refused join).
func awaitFailed(t *testing.T, n *Node) error {
	t.Helper()
	select {
	case err := <-n.Failed():
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("%s was not refused within 20s", n.cfg.NodeID)
		return nil
	}
}

// raftAddrOf is the address of id in n's Raft configuration.
func raftAddrOf(t *testing.T, n *Node, id string) string {
	t.Helper()
	servers, err := n.configuration()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		if s.ID == id {
			return s.RaftAddr
		}
	}
	return ""
}

// A second c3 started elsewhere with --join (the newcomer's typo) is refused in one line that says
// what to do, and stops; the real c3 keeps its place and the cluster stays three voters of three.
func TestJoinWithAVotersIDElsewhereIsRefused(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	c3 := c.nodes[2]
	impostor := startNode(t, joinerConfig(t, "c3", "", nil, c.followers(leader)[0].HTTPAddr()))

	err := awaitFailed(t, impostor)
	msg := err.Error()
	for _, want := range []string{"join refused", "node id c3 is a voter already, at " + c3.RaftAddr(),
		"adding it at " + impostor.RaftAddr() + " would evict that voter", "ctl remove-peer c3", "--replace"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q does not say %q", msg, want)
		}
	}
	if !errors.Is(err, ErrJoinRefused) || strings.Contains(msg, "\n") {
		t.Fatalf("refusal %q: want one line of ErrJoinRefused", msg)
	}
	if got := voters(t, leader); !slices.Equal(got, []string{"c1", "c2", "c3"}) {
		t.Fatalf("voters %v after a refused join", got)
	}
	if got := raftAddrOf(t, leader, "c3"); got != c3.RaftAddr() {
		t.Fatalf("c3 moved to %s", got)
	}
	if servers, _ := impostor.configuration(); len(servers) != 0 {
		t.Fatalf("the refused node has a raft configuration %+v", servers)
	}
	// The real c3 still follows the leader: three of three.
	eventually(t, 10*time.Second, "c3 following "+leader.cfg.NodeID, func() bool {
		id, _ := c3.Leader()
		return id == leader.cfg.NodeID && c3.inConfiguration("c3")
	})
}

// A voter that lost its data dir and comes back at its own address with --join is refused: it
// may have voted in the current term and would vote again.
func TestEmptyDataDirJoinWithAVotersIDIsRefused(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	lost := c.followers(leader)[0]
	id, addr := lost.cfg.NodeID, lost.RaftAddr()
	lost.Kill()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	back := startNode(t, joinerConfig(t, id, "", ln, leader.HTTPAddr()))
	err = awaitFailed(t, back)
	for _, want := range []string{"node id " + id + " is a voter at " + addr + " already", "empty data dir",
		"could vote twice in one term", "ctl remove-peer " + id, "--replace"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if got := voters(t, leader); len(got) != 3 || raftAddrOf(t, leader, id) != addr {
		t.Fatalf("voters %v, %s at %s, after a refused join", got, id, raftAddrOf(t, leader, id))
	}

	// The operator says it is a replacement: the same id at the same address, from an empty data
	// dir, takes the place with --replace and catches up.
	back.Kill()
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cfg := joinerConfig(t, id, "", ln, leader.HTTPAddr())
	cfg.Replace = true
	replacement := startNode(t, cfg)
	eventually(t, 20*time.Second, id+" replaced at "+addr+" and registered", func() bool {
		return len(voters(t, leader)) == 3 && raftAddrOf(t, leader, id) == addr && registered(leader, id) &&
			replacement.inConfiguration(id) && registered(replacement, leader.cfg.NodeID)
	})
}

// --replace makes the replacement explicit: ctl add-peer of a voter's id at another address is
// refused with 409 peer_conflict, and a node started with --join --replace takes the dead voter's
// place at its new address.
func TestReplaceTakesTheVotersPlace(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	dead := c.followers(leader)[0]
	id := dead.cfg.NodeID
	dead.Kill()

	ln := listenLoopback(t)
	newAddr := ln.Addr().String()
	status, body := post(t, leader.HTTPAddr(), admin.PathAddPeer, `{"id":"`+id+`","raft_addr":"`+newAddr+`"}`, nil)
	if status != http.StatusConflict || !strings.Contains(body, `"error":"peer_conflict"`) || !strings.Contains(body, "would evict that voter") {
		t.Fatalf("add-peer of %s at a new address: %d %s, want 409 peer_conflict", id, status, body)
	}
	if status, body := post(t, leader.HTTPAddr(), admin.PathAddPeer, `{"id":"`+leader.cfg.NodeID+`","raft_addr":"`+newAddr+`","replace":true}`, nil); status != http.StatusConflict ||
		!strings.Contains(body, "is the leader answering this call") {
		t.Fatalf("replacing the leader: %d %s, want 409", status, body)
	}

	cfg := joinerConfig(t, id, "", ln, c.followers(leader)[0].HTTPAddr())
	cfg.Replace = true
	n := startNode(t, cfg)
	eventually(t, 20*time.Second, id+" a voter at its new address, registered there", func() bool {
		var reg string
		if r := leader.View().Coordinators; r != nil {
			for _, cv := range r {
				if cv.ID == id {
					reg = cv.RaftAddr
				}
			}
		}
		return len(voters(t, leader)) == 3 && raftAddrOf(t, leader, id) == newAddr && reg == newAddr && n.inConfiguration(id)
	})
	select {
	case err := <-n.Failed():
		t.Fatalf("the replacement failed: %v", err)
	default:
	}
}

// Each --peers typo the newcomer made is refused, naming the entry and what is wrong.
func TestPeersTyposAreRefused(t *testing.T) {
	for name, tc := range map[string]struct{ peers, want string }{
		"semicolons":        {"x1=127.0.0.1:27501;x2=127.0.0.1:27502", `--peers entry "x1=127.0.0.1:27501;x2=127.0.0.1:27502": separate entries with commas`},
		"missing port":      {"x1=127.0.0.1", `--peers entry "x1=127.0.0.1": raft address "127.0.0.1" has no port`},
		"port not a number": {"x1=127.0.0.1:http", `port "http" is not a number from 1 to 65535`},
		"port zero":         {"x1=127.0.0.1:0", `port "0" is not a number`},
		"no host":           {"x1=:7400", `raft address ":7400" has no host`},
		"space":             {"x1=a b:7400", `raft address "a b:7400" contains a space`},
		"no id":             {"=127.0.0.1:7400", `needs an id and a raft address`},
		"not id=addr":       {"127.0.0.1:7400", `--peers entry "127.0.0.1:7400" is not id=host:port`},
		"duplicate id":      {"x1=a:1,x1=b:1", `node id "x1" listed twice ("x1=a:1" and "x1=b:1")`},
		"duplicate address": {"x1=a:1,x2=a:1", `--peers entries "x1=a:1" and "x2=a:1" name the same raft address`},
		"self missing":      {"x2=a:1,x3=b:1", `node id "x1" is not in peers (x2=a:1,x3=b:1)`},
	} {
		peers, err := ParsePeers(tc.peers)
		if err == nil {
			_, err = New(Config{NodeID: "x1", Peers: peers})
		}
		if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: --peers %s: got %v, want one line of ErrBadConfig saying %q", name, tc.peers, err, tc.want)
		}
	}
	good, err := ParsePeers(" c1=10.0.0.1:7400, c2=c2.svc:7400 ,")
	if err != nil || !slices.Equal(good, []Peer{{"c1", "10.0.0.1:7400"}, {"c2", "c2.svc:7400"}}) {
		t.Fatalf("ParsePeers: %v %v", good, err)
	}
}

// This node's own --peers entry must be the address it is dialled at: its --raft-advertise, else
// its bound address (by IP, or by a name that resolves to it).
func TestOwnPeersEntryIsTheAdvertisedAddress(t *testing.T) {
	bound := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7400}
	resolve := func(_ context.Context, host string) ([]string, error) {
		if host == "c1.svc" {
			return []string{"127.0.0.1"}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	for name, tc := range map[string]struct {
		self, advertise string
		want            string // "" when accepted
	}{
		"same address":         {"127.0.0.1:7400", "", ""},
		"a name resolving to":  {"c1.svc:7400", "", ""},
		"advertised":           {"c1.pod:7400", "c1.pod:7400", ""},
		"other port":           {"127.0.0.1:7401", "", `--peers entry "c1=127.0.0.1:7401" is not this node's raft address: it listens on 127.0.0.1:7400 (--raft-addr)`},
		"other ip":             {"127.0.0.2:7400", "", `it listens on 127.0.0.1:7400 (--raft-addr); the other voters would dial 127.0.0.2:7400 and never reach c1`},
		"name not resolving":   {"c9.svc:7400", "", `c9.svc does not resolve`},
		"other than advertise": {"c1.svc:7400", "c1.pod:7400", `it advertises c1.pod:7400 (--raft-advertise)`},
	} {
		n, err := New(Config{NodeID: "c1", RaftAdvertise: tc.advertise, lookupHost: resolve,
			Peers: []Peer{{ID: "c1", RaftAddr: tc.self}, {ID: "c2", RaftAddr: "c2.svc:7400"}}})
		if err != nil {
			t.Fatal(err)
		}
		err = n.cfg.checkSelfPeer(context.Background(), bound)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", name, err)
		case tc.want != "" && (!errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want ErrBadConfig saying %q", name, err, tc.want)
		}
	}
	// Start checks it: a node whose entry is not its bound address does not start.
	ln := listenLoopback(t)
	n, err := New(Config{NodeID: "c1", DataDir: t.TempDir(), NoSync: true, Logger: testLogger(t),
		Peers: []Peer{{ID: "c1", RaftAddr: "127.0.0.1:1"}}, RaftListener: ln, RSocketListener: listenLoopback(t), HTTPListener: listenLoopback(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "is not this node's raft address") {
		t.Fatalf("Start with a wrong own entry: %v", err)
	}
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A --peers that differs from the configuration the data dir holds neither stops the node nor
// goes unsaid: one warn line says what is stored, what was given, and how to change membership.
func TestChangedPeersIsLoggedAtStart(t *testing.T) {
	dir := t.TempDir()
	ln := listenLoopback(t)
	addr := ln.Addr().String()
	first := startNode(t, Config{NodeID: "c1", DataDir: dir, Timing: testTiming, NoSync: true, Logger: testLogger(t), trustFreshState: true,
		Peers: []Peer{{ID: "c1", RaftAddr: addr}}, RaftListener: ln, RSocketListener: listenLoopback(t), HTTPListener: listenLoopback(t)})
	eventually(t, 15*time.Second, "c1 leads", first.IsLeader)
	first.Kill()

	var logs syncBuffer
	again, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	given := []Peer{{ID: "c1", RaftAddr: addr}, {ID: "c2", RaftAddr: "127.0.0.1:9"}}
	startNode(t, Config{NodeID: "c1", DataDir: dir, Timing: testTiming, NoSync: true, Logger: zerolog.New(&logs),
		Peers: given, RaftListener: again, RSocketListener: listenLoopback(t), HTTPListener: listenLoopback(t)})
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "--peers differs") {
			line = l
		}
	}
	for _, want := range []string{`"level":"warn"`, `"stored":"c1=` + addr + `"`, `"given":"c1=` + addr + `,c2=127.0.0.1:9"`,
		"the raft configuration in the data dir, which this node keeps", "ctl add-peer and ctl remove-peer"} {
		if !strings.Contains(line, want) {
			t.Errorf("warn line %q does not say %s", line, want)
		}
	}
}

// A second process on a data dir in use is refused at once, naming the holder's pid; the lock goes
// with the node that held it.
func TestDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	cfg := func() Config {
		return Config{NodeID: "c1", DataDir: dir, Timing: testTiming, NoSync: true, Logger: testLogger(t),
			RaftListener: listenLoopback(t), RSocketListener: listenLoopback(t), HTTPListener: listenLoopback(t)}
	}
	holder := startNode(t, cfg())
	second, err := New(cfg())
	if err != nil {
		t.Fatal(err)
	}
	err = second.Start(context.Background())
	want := "coordinator: data dir " + dir + " is in use by pid " + strconv.Itoa(os.Getpid()) + ": stop it, or give this node its own --data-dir"
	if !errors.Is(err, ErrDataDirInUse) || err == nil || err.Error() != want {
		t.Fatalf("second node on %s: %v, want %q", dir, err, want)
	}
	if b, err := os.ReadFile(filepath.Join(dir, dataDirLockFile)); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("lock file holds %q (%v), want this pid", b, err)
	}
	holder.Kill()
	startNode(t, cfg())
}

// A voter that never registers (here added at an address nobody listens on, as a mistyped
// --peers does) holds up a command of a newer FSM version: the refusal names the likelier cause,
// and the peers list shows it "unregistered", in one word, with the reason apart.
func TestUnregisteredVoterIsNamedAsTheLikelyCause(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	nobody := listenLoopback(t)
	addr := nobody.Addr().String()
	_ = nobody.Close()
	if status, body := post(t, leader.HTTPAddr(), admin.PathAddPeer, `{"id":"c4","raft_addr":"`+addr+`"}`, nil); status != http.StatusOK {
		t.Fatalf("add-peer c4: %d %s", status, body)
	}
	err := leader.apply(&fsm.Pause{Ring: testRing, Reason: "deploy"})
	want := "c4 has not registered its version (it never reached the leader: is it running, and listening at " + addr +
		", its address in the raft configuration? a mistyped --peers gives a voter an address nobody listens on"
	if !errors.Is(err, ErrUpgradeIncomplete) || !strings.Contains(err.Error(), want) {
		t.Fatalf("pause with c4 unregistered: %v, want ErrUpgradeIncomplete saying %q", err, want)
	}
	var peers admin.PeersAnswer
	getJSON(t, leader.HTTPAddr(), admin.PathPeers, &peers)
	for _, p := range peers.Peers {
		if p.ID == "c4" && (p.Problem != admin.PeerUnregistered || !strings.HasPrefix(p.Error, "has not registered its admin address")) {
			t.Fatalf("c4 in the peers list: %+v", p)
		}
	}
}

// A coordinator that has not applied its log since it started knows no peer's admin address yet:
// it says that of itself (admin.Cluster's Behind) rather than that every peer has not
// registered; admin's TestPeersSayWhyAStatusIsMissing reads the sentence it makes of it.
func TestPeersNotKnownYetAfterStart(t *testing.T) {
	dead := listenLoopback(t)
	addr := dead.Addr().String()
	_ = dead.Close()
	n := startNode(t, joinerConfig(t, "c9", "", nil, addr))
	if behind, want := (adminNode{n}).Behind(), "no contact with a leader yet"; behind != want {
		t.Fatalf("Behind: %q, want %q", behind, want)
	}
}

// A leader of an older release refuses the join's new fields as unknown (its strict decoding):
// the joining node then joins as that release did, unchecked, rather than not at all during a
// rolling upgrade.
func TestJoinThroughAnOlderLeaderIsUnchecked(t *testing.T) {
	var mu sync.Mutex
	var plain []admin.PeerRequest
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID       string `json:"id"`
			RaftAddr string `json:"raft_addr"`
		}
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			admin.WriteError(w, fmt.Errorf("%w: body: %w", lease.ErrBadRequest, err))
			return
		}
		mu.Lock()
		plain = append(plain, admin.PeerRequest{ID: req.ID, RaftAddr: req.RaftAddr})
		mu.Unlock()
		admin.WriteJSON(w, http.StatusOK, admin.PeerChangeAnswer{LeaderID: "c1"})
	}))
	t.Cleanup(old.Close)
	n := startNode(t, joinerConfig(t, "c9", "", nil, strings.TrimPrefix(old.URL, "http://")))
	eventually(t, 10*time.Second, "a plain join request", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(plain) > 0
	})
	mu.Lock()
	got := plain[0]
	mu.Unlock()
	if got != (admin.PeerRequest{ID: "c9", RaftAddr: n.RaftAddr()}) {
		t.Fatalf("the older leader got %+v", got)
	}
	select {
	case <-n.raftGate:
	default:
		t.Fatal("the Raft listener is still held after the unchecked join was accepted")
	}
}
