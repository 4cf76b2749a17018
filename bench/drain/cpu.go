package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/retryring/retryring/testkit/procstat"
)

// otherJVMs is the class of the Cassandra JVMs that serve none of the targets.
const otherJVMs = "other"

// cpuSnap is the CPU time used so far by the processes a figure splits the machine into: the
// Cassandra JVMs of each target (by the listen address of their cassandra.yaml), the other
// Cassandra JVMs, this process (the recorder and the in-process workers), and the whole machine,
// whose remainder is what other sessions ran meanwhile.
type cpuSnap struct {
	at      time.Time
	machine int64
	self    int64
	jvms    map[int]jvmTicks
}

type jvmTicks struct {
	class string
	ticks int64
}

// cpuSpan is the CPU seconds each class used between two snapshots.
type cpuSpan struct {
	wall       time.Duration
	jvms       map[string]float64 // by class
	self, rest float64
	exited     int
}

// cpuClasses maps the listen address of a Cassandra JVM to the target it serves.
type cpuClasses map[string]string

func newCPUClasses(targets []target) cpuClasses {
	c := cpuClasses{}
	for _, t := range targets {
		for _, h := range t.hosts {
			if host, _, err := net.SplitHostPort(h); err == nil {
				h = host
			}
			c[h] = t.name
		}
	}
	return c
}

// classOf is the target a Cassandra JVM serves, from the listen_address of the cassandra.yaml
// its command line names (-Dcassandra.config=file://...).
func (c cpuClasses) classOf(args []string) string {
	for _, a := range args {
		path, ok := strings.CutPrefix(a, "-Dcassandra.config=file://")
		if !ok {
			continue
		}
		f, err := os.Open(path)
		if err != nil {
			return otherJVMs
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "listen_address:"); ok {
				if name, ok := c[strings.Trim(strings.TrimSpace(v), `"'`)]; ok {
					return name
				}
				return otherJVMs
			}
		}
	}
	return otherJVMs
}

func (c cpuClasses) take() (cpuSnap, error) {
	s := cpuSnap{at: time.Now(), jvms: map[int]jvmTicks{}}
	var err error
	if s.machine, err = procstat.MachineBusyTicks(); err != nil {
		return s, err
	}
	if s.self, err = procstat.CPUTicks(os.Getpid()); err != nil {
		return s, err
	}
	classes := map[int]string{}
	pids, err := procstat.Find(func(args []string) bool {
		return slices.Contains(args, "org.apache.cassandra.service.CassandraDaemon")
	})
	if err != nil {
		return s, err
	}
	for _, pid := range pids {
		if args, err := procstat.Cmdline(pid); err == nil {
			classes[pid] = c.classOf(args)
		}
	}
	for pid, class := range classes {
		if t, err := procstat.CPUTicks(pid); err == nil { // else it exited meanwhile
			s.jvms[pid] = jvmTicks{class: class, ticks: t}
		}
	}
	return s, nil
}

// since is the span from a to b. A JVM that started inside the span counts all its time; one that
// exited inside it counts none of its own (it is in the machine's total, hence in rest), and is
// counted in exited.
func (b cpuSnap) since(a cpuSnap) cpuSpan {
	sp := cpuSpan{wall: b.at.Sub(a.at), jvms: map[string]float64{}}
	var jvms float64
	for pid, t := range b.jvms {
		sec := float64(t.ticks-a.jvms[pid].ticks) / procstat.TicksPerSecond
		sp.jvms[t.class] += sec
		jvms += sec
	}
	for pid := range a.jvms {
		if _, ok := b.jvms[pid]; !ok {
			sp.exited++
		}
	}
	sp.self = float64(b.self-a.self) / procstat.TicksPerSecond
	sp.rest = float64(b.machine-a.machine)/procstat.TicksPerSecond - jvms - sp.self
	return sp
}

// add sums two spans.
func (sp cpuSpan) add(o cpuSpan) cpuSpan {
	out := cpuSpan{wall: sp.wall + o.wall, jvms: map[string]float64{}, self: sp.self + o.self, rest: sp.rest + o.rest, exited: sp.exited + o.exited}
	for k, v := range sp.jvms {
		out.jvms[k] += v
	}
	for k, v := range o.jvms {
		out.jvms[k] += v
	}
	return out
}

// cells is the span as table cells: CPU seconds of the JVMs of each class (in the order of
// classes, then the other JVMs), of this process, of the rest of the machine, and the machine's
// busy share of its cores.
func (sp cpuSpan) cells(classes []string, cores int) string {
	var b strings.Builder
	total := sp.self + sp.rest
	for _, c := range append(slices.Clone(classes), otherJVMs) {
		fmt.Fprintf(&b, "%.1f | ", sp.jvms[c])
		total += sp.jvms[c]
	}
	fmt.Fprintf(&b, "%.1f | %.1f | %.0f %%", sp.self, sp.rest, total/(sp.wall.Seconds()*float64(cores))*100)
	if sp.exited > 0 {
		fmt.Fprintf(&b, " (%d JVM exited: its time is in rest)", sp.exited)
	}
	return b.String()
}

// cpuHeader is the header of the cells, and its alignment row.
func cpuHeader(classes []string) (string, string) {
	var h, a strings.Builder
	for _, c := range append(slices.Clone(classes), "other Cassandra") {
		fmt.Fprintf(&h, "%s JVMs CPU s | ", c)
		a.WriteString("---:|")
	}
	h.WriteString("bench (recorder, workers) CPU s | rest of the machine CPU s | machine busy")
	a.WriteString("---:|---:|---:|")
	return h.String(), a.String()
}
