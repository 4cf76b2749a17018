package ringtest

import (
	"runtime"
	"strings"
	"time"
)

// leakMarkers are the packages whose goroutines must all have ended once a cluster is closed.
var leakMarkers = []string{
	"github.com/retryring/retryring/coordinator.",
	"github.com/retryring/retryring/worker/",
	"github.com/retryring/retryring/testkit/ringtest/faultproxy.",
	"github.com/hashicorp/raft.",
}

// knownParked are goroutines left parked on purpose: a waiter on a hashicorp/raft future that
// Raft never answered because it shut down (hashicorp/raft#498; see coordinator.awaitFuture).
var knownParked = []string{
	"github.com/retryring/retryring/coordinator.(*Node).awaitFuture.func1",
}

// leakGrace bounds how long goroutines may take to notice that everything was closed.
const leakGrace = 5 * time.Second

// goroutines returns the stack of every goroutine by its header line ("goroutine 12 [running]:"
// without the state, so that a goroutine keeps its key while it runs).
func goroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		head, _, _ := strings.Cut(g, " [")
		out[head] = g
	}
	return out
}

// leakedGoroutines waits, bounded, until no goroutine outside before runs code of leakMarkers, and
// returns the stacks of those that still do. before is what goroutines returned when the cluster
// started: a goroutine leaked by an earlier test is that test's failure, not this one's.
func leakedGoroutines(before map[string]string) []string {
	var leaked []string
	_ = poll(leakGrace, func() bool {
		leaked = leaked[:0]
		for head, g := range goroutines() {
			if _, old := before[head]; old || parkedOnPurpose(g) {
				continue
			}
			for _, m := range leakMarkers {
				if strings.Contains(g, m) {
					leaked = append(leaked, g)
					break
				}
			}
		}
		return len(leaked) == 0
	})
	return leaked
}

// parkedOnPurpose reports whether the goroutine g is one of knownParked and blocked where it is
// allowed to be: in a raft future's Error, nowhere else.
func parkedOnPurpose(g string) bool {
	for _, k := range knownParked {
		if strings.Contains(g, k) && strings.Contains(g, "github.com/hashicorp/raft.(*deferError).Error") {
			return true
		}
	}
	return false
}
