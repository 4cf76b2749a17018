package procstat

import (
	"os"
	"testing"
	"time"
)

// TestSamplerReadsThisProcess: the /proc readings of this very process are sane: it has some
// resident memory, and a busy loop of a few hundred milliseconds shows as CPU time.
func TestSamplerReadsThisProcess(t *testing.T) {
	s := Sample(os.Getpid(), 10*time.Millisecond)
	for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); {
	}
	u := s.Finish()
	if u.Err != nil {
		t.Fatal(u.Err)
	}
	if u.CPUPercent <= 0 || u.PeakRSSMiB <= 0 || u.LastRSSMiB <= 0 {
		t.Fatalf("usage %+v: a busy process with memory reads as idle or empty", u)
	}
	if _, err := CPUTicks(-1); err == nil {
		t.Error("no error for a process that does not exist")
	}
	peak, err := PeakRSSKiB(os.Getpid())
	if err != nil || peak*1024 < int64(u.LastRSSMiB*1024*1024)/2 {
		t.Errorf("VmHWM %d KiB (%v) below half the last VmRSS of %.1f MiB", peak, err, u.LastRSSMiB)
	}
}

// TestReadSyscallsCountsThisProcess: writes this process makes show in its write count.
func TestReadSyscallsCountsThisProcess(t *testing.T) {
	before, err := ReadSyscalls(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(t.TempDir() + "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const writes = 10
	for range writes {
		if _, err := f.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	after, err := ReadSyscalls(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after.Writes-before.Writes < writes || after.Reads < before.Reads {
		t.Fatalf("before %+v, after %+v: %d writes not counted", before, after, writes)
	}
	if _, err := ReadSyscalls(-1); err == nil {
		t.Error("no error for a process that does not exist")
	}
}
