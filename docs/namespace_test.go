package docs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The environment variables that make the test binary a Cassandra forwarder inside a namespace.
const (
	forwardSocketEnv = "DOCTEST_FORWARD_SOCKET" // the Unix socket the test serves
	forwardListenEnv = "DOCTEST_FORWARD_LISTEN" // the address the docs dial, in the namespace
)

// documentedCassandra is where the docs' commands find Cassandra.
const documentedCassandra = "127.0.0.1:9042"

// namespaceScript runs as root under `unshare --pid --net --mount`: it brings the namespace's loopback
// up, puts the run's hosts file over /etc/hosts (seen by this mount namespace only) and becomes the
// Cassandra forwarder, the PID namespace's first process, which holds the namespaces for the blocks
// that nsenter them. When it dies, every process of the namespace dies with it.
const namespaceScript = `set -e
ip link set lo up
mount --bind "$1" /etc/hosts
exec "$2"
`

// A namespace is a PID, network and mount namespace for one file's blocks, held by its forwarder.
type namespace struct {
	holder *exec.Cmd // unshare, whose forked child is the forwarder
	init   int       // the forwarder's PID (on the host)
	exited chan struct{}
	socket net.Listener
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

var sanDNS = regexp.MustCompile(`DNS:([A-Za-z0-9][A-Za-z0-9.-]*)`)

// hostsFor lists the hosts file of a run: every DNS name of a subjectAltName in the blocks, on 127.0.0.1.
func hostsFor(blocks []block) string {
	seen := map[string]bool{}
	for _, b := range blocks {
		for _, m := range sanDNS.FindAllStringSubmatch(b.text, -1) {
			seen[strings.TrimSuffix(m[1], ".")] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	var sb strings.Builder
	sb.WriteString("127.0.0.1 localhost\n::1 localhost\n")
	for _, n := range names {
		fmt.Fprintf(&sb, "127.0.0.1 %s\n", n)
	}
	return sb.String()
}

// startNamespace starts the namespace holder and the host side of the Cassandra forwarder (a Unix
// socket in dir that dials cassandra). It fails the test when the namespace cannot be made.
func startNamespace(t *testing.T, dir, hosts, cassandra string) *namespace {
	t.Helper()
	for _, tool := range []string{"unshare", "nsenter", "ip", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: the docs run in a network namespace of their own (util-linux, iproute2, root): %v", tool, err)
		}
	}
	if os.Geteuid() != 0 {
		t.Fatal("the docs run in a network namespace of their own (unshare --net), which needs root, as `make test` has")
	}
	hostsFile := filepath.Join(dir, "hosts")
	if err := os.WriteFile(hostsFile, []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "cassandra.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("the Cassandra forwarder's socket: %v", err)
	}
	ns := &namespace{socket: ln, exited: make(chan struct{})}
	ns.wg.Add(1)
	go ns.serve(cassandra)

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// --kill-child and Pdeathsig: if this test process dies without its cleanups (a -timeout panic),
	// unshare dies, its child (the namespace's first process) is killed, and with it every
	// process the blocks started.
	cmd := exec.Command("unshare", "--pid", "--kill-child", "--net", "--mount", "--propagation", "private",
		"sh", "-c", namespaceScript, "ns", hostsFile, self)
	cmd.Env = append(os.Environ(), forwardSocketEnv+"="+sock, forwardListenEnv+"="+documentedCassandra)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("unshare --net --mount: %v", err)
	}
	ns.holder = cmd
	go func() { _ = cmd.Wait(); close(ns.exited) }()
	t.Cleanup(ns.stop)
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- line
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case line := <-ready:
		if strings.TrimSpace(line) != "ready" {
			t.Fatalf("the namespace did not start (its forwarder said %q): see the lines above", line)
		}
		children, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
		if ns.init, err = strconv.Atoi(strings.TrimSpace(string(children))); err != nil {
			t.Fatalf("the namespace's first process (a child of unshare %d): %q: %v", cmd.Process.Pid, children, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the namespace's forwarder did not say ready within 30 s")
	}
	return ns
}

// serve passes every connection of the Unix socket on to Cassandra.
func (ns *namespace) serve(cassandra string) {
	defer ns.wg.Done()
	for {
		c, err := ns.socket.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", cassandra, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		ns.mu.Lock()
		ns.conns = append(ns.conns, c, up)
		ns.mu.Unlock()
		go pipe(c, up)
	}
}

// nsenter returns the command line prefix that runs a program inside the namespace, in dir
// (entering a mount namespace moves to its root directory otherwise). nsenter forks the program
// into the PID namespace; both stay in the caller's process group.
func (ns *namespace) nsenter(dir string) []string {
	return []string{"nsenter", "--target", strconv.Itoa(ns.init), "--pid", "--net", "--mount", "--wd=" + dir, "--"}
}

func (ns *namespace) stop() {
	_ = syscall.Kill(-ns.holder.Process.Pid, syscall.SIGKILL)
	<-ns.exited
	ns.socket.Close()
	ns.mu.Lock()
	for _, c := range ns.conns {
		c.Close()
	}
	ns.mu.Unlock()
	ns.wg.Wait()
}

// pipe copies both ways until either side closes, then closes both.
func pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(a, b); done <- struct{}{} }()
	go func() { _, _ = io.Copy(b, a); done <- struct{}{} }()
	<-done
	a.Close()
	b.Close()
	<-done
}

// forward is the test binary's life as the forwarder inside a namespace: it listens where the docs
// dial Cassandra and passes every connection to the test's Unix socket. It runs until killed.
func forward(listen, socket string) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("forwarder: listen on %s in the namespace: %w", listen, err)
	}
	fmt.Println("ready")
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("forwarder: %w", err)
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			up, err := (&net.Dialer{}).DialContext(ctx, "unix", socket)
			if err != nil {
				c.Close()
				return
			}
			pipe(c, up)
		}()
	}
}
