package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCPUClassOfReadsListenAddress: a Cassandra JVM belongs to the target whose host is the
// listen_address of the cassandra.yaml its command line names; any other JVM is "other".
func TestCPUClassOfReadsListenAddress(t *testing.T) {
	c := newCPUClasses([]target{
		{name: "shared", hosts: []string{"127.0.0.1:9042"}},
		{name: "cluster", hosts: []string{"127.0.0.2:9042", "127.0.0.3"}},
	})
	dir := t.TempDir()
	yaml := func(name, body string) []string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return []string{"java", "-Dcassandra.config=file://" + p, "org.apache.cassandra.service.CassandraDaemon"}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{yaml("a.yaml", "cluster_name: x\nlisten_address: 127.0.0.2\nrpc_address: 127.0.0.2\n"), "cluster"},
		{yaml("b.yaml", "listen_address: '127.0.0.3'\n"), "cluster"},
		{yaml("c.yaml", "listen_address: 127.0.0.1\n"), "shared"},
		{yaml("d.yaml", "listen_address: 127.0.0.9\n"), otherJVMs},
		{yaml("e.yaml", "rpc_address: 127.0.0.2\n"), otherJVMs},
		{[]string{"java", "-Dcassandra.config=file://" + filepath.Join(dir, "missing.yaml")}, otherJVMs},
		{[]string{"java"}, otherJVMs},
	} {
		if got := c.classOf(tc.args); got != tc.want {
			t.Errorf("classOf(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

// TestCPUSpanSplitsTheMachine: a span sums each class's JVMs (a JVM started inside it counts all
// its time, one that exited counts none and is reported), and the rest is the machine's busy time
// that no class or this process used.
func TestCPUSpanSplitsTheMachine(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 13, 0, 0, 0, time.UTC)
	a := cpuSnap{at: t0, machine: 10_000, self: 100, jvms: map[int]jvmTicks{
		1: {"cluster", 1000}, 2: {"cluster", 2000}, 3: {"shared", 500}, 4: {"cluster", 700}}}
	b := cpuSnap{at: t0.Add(10 * time.Second), machine: 11_900, self: 200, jvms: map[int]jvmTicks{
		1: {"cluster", 1300}, 2: {"cluster", 2300}, 3: {"shared", 600}, 5: {"cluster", 400}}}
	sp := b.since(a)
	// cluster: 300 + 300 + 400 (pid 5 started) = 1000 ticks; shared 100; self 100; machine 1900.
	if sp.jvms["cluster"] != 10 || sp.jvms["shared"] != 1 || sp.self != 1 || sp.rest != 7 || sp.exited != 1 {
		t.Fatalf("span %+v: want cluster 10 s, shared 1 s, self 1 s, rest 7 s, 1 exited", sp)
	}
	cells := sp.cells([]string{"shared", "cluster"}, 2)
	if want := "1.0 | 10.0 | 0.0 | 1.0 | 7.0 | 95 % (1 JVM exited: its time is in rest)"; cells != want {
		t.Errorf("cells %q, want %q", cells, want)
	}
	head, align := cpuHeader([]string{"shared", "cluster"})
	if strings.Count(head, "|") != strings.Count(align, "|")-1 || !strings.HasPrefix(head, "shared JVMs CPU s | cluster JVMs CPU s | other Cassandra JVMs CPU s") {
		t.Errorf("header %q, alignment %q", head, align)
	}
	if sum := sp.add(sp); sum.jvms["cluster"] != 20 || sum.wall != 20*time.Second || sum.exited != 2 {
		t.Errorf("sum %+v", sum)
	}
}
