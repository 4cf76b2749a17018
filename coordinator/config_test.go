package coordinator

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/lease"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{}.WithDefaults()
	if c.NodeID != DefaultNodeID || c.RaftAddr != DefaultRaftAddr || c.RSocketAddr != DefaultRSocketAddr ||
		c.HTTPAddr != DefaultHTTPAddr || c.DataDir != "data/c1" || c.SilenceTimeout != DefaultSilenceTimeout ||
		c.LeaderLeaseTimeout != DefaultLeaderLeaseTimeout || c.Timing.TTL != lease.DefaultTTL || c.Clock == nil ||
		c.ReportPeriod != lease.ReportPeriod {
		t.Fatalf("defaults: %+v", c)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("the zero config must be valid (one node on a laptop): %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	peers := []Peer{{ID: "c1", RaftAddr: "a:1"}, {ID: "c2", RaftAddr: "b:1"}}
	for name, tc := range map[string]struct {
		cfg  Config
		want string
	}{
		"self not in peers":      {Config{NodeID: "c9", Peers: peers}, "not in peers"},
		"peer listed twice":      {Config{NodeID: "c1", Peers: append(peers, Peer{ID: "c1", RaftAddr: "c:1"})}, "twice"},
		"peer without address":   {Config{NodeID: "c1", Peers: []Peer{{ID: "c1"}}}, "raft address"},
		"lease above heartbeat":  {Config{LeaderLeaseTimeout: time.Second, HeartbeatTimeout: 500 * time.Millisecond}, "exceeds heartbeat"},
		"election below heartbt": {Config{ElectionTimeout: 100 * time.Millisecond}, "below heartbeat"},
		"renewal too slow":       {Config{Timing: lease.Timing{TTL: time.Second, Renewal: time.Second}}, "renewal"},
		"lease lease beyond TTL": {Config{Timing: lease.Timing{TTL: 200 * time.Millisecond, Renewal: 50 * time.Millisecond}}, "below the lease TTL"},
		"negative silence":       {Config{SilenceTimeout: -time.Second}, "negative"},
		"negative report period": {Config{ReportPeriod: -time.Second}, "negative report period"},
		"node id with a slash":   {Config{NodeID: "a/b"}, "node id"},
	} {
		err := tc.cfg.Validate()
		if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want ErrBadConfig mentioning %q", name, err, tc.want)
		}
	}
	if _, err := New(Config{NodeID: "c9", Peers: peers}); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("New must validate: %v", err)
	}
}

func TestRaftAdvertiseComesFromPeersFirst(t *testing.T) {
	c := Config{NodeID: "c2", Peers: []Peer{{ID: "c1", RaftAddr: "a:1"}, {ID: "c2", RaftAddr: "proxy:7"}}}
	if got := c.raftAdvertise("127.0.0.1:5"); got != "proxy:7" {
		t.Fatalf("advertise %q", got)
	}
	c.RaftAdvertise = "explicit:1"
	if got := c.raftAdvertise("127.0.0.1:5"); got != "explicit:1" {
		t.Fatalf("advertise %q", got)
	}
	if got := (Config{}).raftAdvertise("127.0.0.1:5"); got != "127.0.0.1:5" {
		t.Fatalf("advertise %q", got)
	}
}
