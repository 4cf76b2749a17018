package main

import (
	"os"
	"testing"
	"time"
)

// TestSamplerReadsThisProcess: the /proc readings of this very process are sane: it has some
// resident memory, and a busy loop of a few hundred milliseconds shows as CPU time.
func TestSamplerReadsThisProcess(t *testing.T) {
	s := sample(os.Getpid(), 10*time.Millisecond)
	for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); {
	}
	u := s.finish()
	if u.Err != nil {
		t.Fatal(u.Err)
	}
	if u.CPUPercent <= 0 || u.PeakRSSMiB <= 0 || u.LastRSSMiB <= 0 {
		t.Fatalf("usage %+v: a busy process with memory reads as idle or empty", u)
	}
	if _, err := cpuTicks(-1); err == nil {
		t.Error("no error for a process that does not exist")
	}
}
