package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/retryring/retryring/testkit/procstat"
)

// cpuSnap is the CPU time used so far by the processes a figure splits the machine into: the
// Cassandra JVMs of the cluster (their storage directory under clusterDir), every other Cassandra
// JVM (the shared single node), this process (the recorder and the in-process workers), and the
// whole machine, whose remainder is what other sessions ran meanwhile.
type cpuSnap struct {
	at      time.Time
	machine int64
	self    int64
	cluster map[int]int64 // pid -> ticks
	single  map[int]int64
}

// cpuSpan is the CPU seconds each class used between two snapshots.
type cpuSpan struct {
	wall                            time.Duration
	cluster, single, self, rest     float64
	clusterJVMs, singleJVMs, exited int
}

func takeCPU(clusterDir string) (cpuSnap, error) {
	s := cpuSnap{at: time.Now(), cluster: map[int]int64{}, single: map[int]int64{}}
	var err error
	if s.machine, err = procstat.MachineBusyTicks(); err != nil {
		return s, err
	}
	if s.self, err = procstat.CPUTicks(os.Getpid()); err != nil {
		return s, err
	}
	dirs := map[int]string{}
	pids, err := procstat.Find(func(args []string) bool {
		return slices.Contains(args, "org.apache.cassandra.service.CassandraDaemon")
	})
	if err != nil {
		return s, err
	}
	for _, pid := range pids {
		args, err := procstat.Cmdline(pid)
		if err != nil {
			continue
		}
		for _, a := range args {
			if d, ok := strings.CutPrefix(a, "-Dcassandra.storagedir="); ok {
				dirs[pid] = d
			}
		}
	}
	for pid, dir := range dirs {
		t, err := procstat.CPUTicks(pid)
		if err != nil {
			continue // exited meanwhile
		}
		if strings.HasPrefix(filepath.Clean(dir), clusterDir+string(filepath.Separator)) {
			s.cluster[pid] = t
		} else {
			s.single[pid] = t
		}
	}
	return s, nil
}

// since is the span from a to b. A JVM that started inside the span counts all its time; one that
// exited inside it counts none of its own (it is in the machine's total, hence in rest), and is
// counted in exited.
func (b cpuSnap) since(a cpuSnap) cpuSpan {
	sp := cpuSpan{wall: b.at.Sub(a.at), clusterJVMs: len(b.cluster), singleJVMs: len(b.single)}
	sum := func(from, to map[int]int64) float64 {
		var ticks int64
		for pid, t := range to {
			ticks += t - from[pid]
		}
		for pid := range from {
			if _, ok := to[pid]; !ok {
				sp.exited++
			}
		}
		return float64(ticks) / procstat.TicksPerSecond
	}
	sp.cluster = sum(a.cluster, b.cluster)
	sp.single = sum(a.single, b.single)
	sp.self = float64(b.self-a.self) / procstat.TicksPerSecond
	sp.rest = float64(b.machine-a.machine)/procstat.TicksPerSecond - sp.cluster - sp.single - sp.self
	return sp
}

// cells is the span as table cells: CPU seconds of the cluster's JVMs, of the single node's, of
// this process, of the rest of the machine, and the machine's busy share of its cores.
func (sp cpuSpan) cells(cores int) string {
	busy := (sp.cluster + sp.single + sp.self + sp.rest) / (sp.wall.Seconds() * float64(cores)) * 100
	c := fmt.Sprintf("%.1f | %.1f | %.1f | %.1f | %.0f %%", sp.cluster, sp.single, sp.self, sp.rest, busy)
	if sp.exited > 0 {
		c += fmt.Sprintf(" (%d JVM exited: its time is in rest)", sp.exited)
	}
	return c
}

// cpuHeader is the header of the cells.
const cpuHeader = "cluster JVMs CPU s | single-node JVM CPU s | bench (recorder, workers) CPU s | rest of the machine CPU s | machine busy"

// add sums two spans.
func (sp cpuSpan) add(o cpuSpan) cpuSpan {
	return cpuSpan{wall: sp.wall + o.wall, cluster: sp.cluster + o.cluster, single: sp.single + o.single,
		self: sp.self + o.self, rest: sp.rest + o.rest, clusterJVMs: max(sp.clusterJVMs, o.clusterJVMs),
		singleJVMs: max(sp.singleJVMs, o.singleJVMs), exited: sp.exited + o.exited}
}
