package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on every Linux this
// runs on.
const clockTicks = 100

// usage samples a process's CPU time and resident memory over a phase.
type usage struct {
	pid     int
	start   time.Time
	ticks0  int64
	rssPeak int64
	stop    chan struct{}
	done    chan struct{}
}

func sample(pid int) *usage {
	u := &usage{pid: pid, start: time.Now(), ticks0: cpuTicks(pid), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(u.done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			u.rssPeak = max(u.rssPeak, rssKiB(pid))
			select {
			case <-u.stop:
				return
			case <-t.C:
			}
		}
	}()
	return u
}

// finish returns the CPU used as a share of one core, and the peak RSS in KiB.
func (u *usage) finish() (float64, int64) {
	close(u.stop)
	<-u.done
	used := float64(cpuTicks(u.pid)-u.ticks0) / clockTicks
	return used / time.Since(u.start).Seconds(), u.rssPeak
}

// cpuTicks is utime + stime of /proc/<pid>/stat; 0 when unreadable.
func cpuTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count fields after its closing parenthesis.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return ut + st
}

// rssKiB is VmRSS of /proc/<pid>/status; 0 when unreadable.
func rssKiB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

func httpGet(ctx context.Context, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(io.LimitReader(resp.Body, 4<<20))
}
