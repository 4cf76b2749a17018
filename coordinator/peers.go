package coordinator

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/retryring/retryring/coordinator/admin"
)

// Peers (--peers) is the one list a cluster bootstraps from, so a typo in it costs a voter or a
// cluster: "x1=a:1;x2=b:1" once bootstrapped a single node named x1 at the address
// "a:1;x2=b:1". It is therefore read strictly: ParsePeers splits it, Config.Validate checks every
// entry, and Start checks this node's own entry against the address it listens on.

// ParsePeers reads --peers: id=host:port entries separated by commas. It only splits; every
// entry is checked by Config.Validate (New), which names the entry and what is wrong with it.
func ParsePeers(s string) ([]Peer, error) {
	var out []Peer
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		id, addr, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("%w: --peers entry %q is not id=host:port", ErrBadConfig, item)
		}
		out = append(out, Peer{ID: strings.TrimSpace(id), RaftAddr: strings.TrimSpace(addr)})
	}
	return out, nil
}

// String is the peer as --peers spells it.
func (p Peer) String() string { return p.ID + "=" + p.RaftAddr }

// validatePeers checks every entry of peers and that ids and addresses are unique, and that
// nodeID is one of them. Each refusal names the entry.
func validatePeers(peers []Peer, nodeID string) error {
	ids := map[string]Peer{}
	addrs := map[string]Peer{}
	for _, p := range peers {
		if err := p.validate(); err != nil {
			return err
		}
		if q, dup := ids[p.ID]; dup {
			return fmt.Errorf("%w: --peers: node id %q listed twice (%q and %q): every voter needs its own id", ErrBadConfig, p.ID, q.String(), p.String())
		}
		if q, dup := addrs[p.RaftAddr]; dup {
			return fmt.Errorf("%w: --peers entries %q and %q name the same raft address: every voter needs its own", ErrBadConfig, q.String(), p.String())
		}
		ids[p.ID], addrs[p.RaftAddr] = p, p
	}
	if _, ok := ids[nodeID]; !ok && len(peers) > 0 {
		return fmt.Errorf("%w: node id %q is not in peers (%s): give this node's own entry too, the same list on every node", ErrBadConfig, nodeID, peersString(peers))
	}
	return nil
}

func (p Peer) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: --peers entry %q: %s", ErrBadConfig, p.String(), fmt.Sprintf(format, args...))
	}
	switch {
	case strings.ContainsAny(p.RaftAddr, ";=") || strings.Contains(p.ID, ";"):
		return bad("separate entries with commas (id=host:port,id=host:port)")
	case strings.ContainsAny(p.RaftAddr, " \t\n"):
		return bad("raft address %q contains a space", p.RaftAddr)
	case p.ID == "" || p.RaftAddr == "":
		return bad("needs an id and a raft address (id=host:port)")
	case !admin.ValidNodeID(p.ID):
		return bad("%q is not a node id (no spaces or slashes, at most 128 bytes)", p.ID)
	}
	host, port, err := net.SplitHostPort(p.RaftAddr)
	if err != nil {
		if !strings.Contains(p.RaftAddr, ":") {
			return bad("raft address %q has no port (want host:port)", p.RaftAddr)
		}
		return bad("raft address %q is not host:port", p.RaftAddr)
	}
	if host == "" {
		return bad("raft address %q has no host: the others could not dial it", p.RaftAddr)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return bad("raft address %q: port %q is not a number from 1 to 65535", p.RaftAddr, port)
	}
	return nil
}

func peersString(peers []Peer) string {
	s := make([]string, len(peers))
	for i, p := range peers {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// checkSelfPeer refuses a --peers whose entry for this node is not the address it is dialled
// at: --raft-advertise when given, else the bound Raft address. A host name that resolves to the
// bound IP is that address (the chart's pods bind an IP and are named by DNS); a node bound to
// every interface takes any host with its port.
func (c Config) checkSelfPeer(ctx context.Context, bound net.Addr) error {
	i := slices.IndexFunc(c.Peers, func(p Peer) bool { return p.ID == c.NodeID })
	if i < 0 {
		return nil
	}
	self := c.Peers[i]
	wrong := func(format string, args ...any) error {
		return fmt.Errorf("%w: --peers entry %q is not this node's raft address: %s; the other voters would dial %s and never reach %s",
			ErrBadConfig, self.String(), fmt.Sprintf(format, args...), self.RaftAddr, self.ID)
	}
	if a := c.RaftAdvertise; a != "" {
		if a != self.RaftAddr {
			return wrong("it advertises %s (--raft-advertise)", a)
		}
		return nil
	}
	tcp, ok := bound.(*net.TCPAddr)
	if !ok {
		return nil
	}
	host, port, _ := net.SplitHostPort(self.RaftAddr) // validated
	if port != strconv.Itoa(tcp.Port) {
		return wrong("it listens on %s (--raft-addr)", bound)
	}
	if tcp.IP.IsUnspecified() {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil {
		if !ip.Equal(tcp.IP) {
			return wrong("it listens on %s (--raft-addr)", bound)
		}
		return nil
	}
	lookup := c.lookupHost
	if lookup == nil {
		lookup = net.DefaultResolver.LookupHost
	}
	ips, err := lookup(ctx, host)
	if err != nil {
		return wrong("%s does not resolve (%v), and it listens on %s (--raft-addr)", host, err, bound)
	}
	for _, s := range ips {
		if ip := net.ParseIP(s); ip != nil && ip.Equal(tcp.IP) {
			return nil
		}
	}
	return wrong("%s resolves to %s, and it listens on %s (--raft-addr)", host, strings.Join(ips, ", "), bound)
}

// warnPeersChanged says, in one line at start, that --peers differs from the configuration the
// data directory holds. The stored configuration wins (it is what the cluster agreed on, and
// ctl add-peer or a scale-up changes it without changing anyone's flags), so this is never a
// start-up error: that would crash-loop a StatefulSet after a legitimate change.
func (n *Node) warnPeersChanged(stored raft.Configuration) {
	if len(n.cfg.Peers) == 0 {
		return
	}
	var have []Peer
	for _, s := range stored.Servers {
		have = append(have, Peer{ID: string(s.ID), RaftAddr: string(s.Address)})
	}
	key := func(ps []Peer) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = p.String()
		}
		slices.Sort(out)
		return out
	}
	if slices.Equal(key(have), key(n.cfg.Peers)) {
		return
	}
	n.log.Warn().Str("stored", peersString(have)).Str("given", peersString(n.cfg.Peers)).
		Msg("--peers differs from the raft configuration in the data dir, which this node keeps: --peers only bootstraps a new cluster; change membership with ctl add-peer and ctl remove-peer")
}
