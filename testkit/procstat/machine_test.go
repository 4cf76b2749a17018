package procstat

import (
	"os"
	"slices"
	"testing"
	"time"
)

// TestMachineBusyTicksCountsThisProcess: a busy loop of this process shows in the machine's busy
// time, which is at least what the process itself used over the loop.
func TestMachineBusyTicksCountsThisProcess(t *testing.T) {
	before, err := MachineBusyTicks()
	if err != nil {
		t.Fatal(err)
	}
	self, err := CPUTicks(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); {
	}
	after, err := MachineBusyTicks()
	if err != nil {
		t.Fatal(err)
	}
	selfAfter, err := CPUTicks(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// One tick of slack: the two files are read at slightly different moments.
	if selfAfter-self <= 0 || after-before < selfAfter-self-1 {
		t.Fatalf("machine busy %d ticks, this process %d ticks over a busy loop", after-before, selfAfter-self)
	}
}

// TestFindThisProcess: Find matches on the command line, and finds this test binary by its own.
func TestFindThisProcess(t *testing.T) {
	args, err := Cmdline(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if len(args) == 0 || args[0] != os.Args[0] {
		t.Fatalf("cmdline %q, os.Args %q", args, os.Args)
	}
	pids, err := Find(func(a []string) bool { return slices.Equal(a, os.Args) })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pids, os.Getpid()) {
		t.Fatalf("Find by this process's arguments returned %v, not pid %d", pids, os.Getpid())
	}
	if _, err := Cmdline(-1); err == nil {
		t.Error("no error for a process that does not exist")
	}
}
