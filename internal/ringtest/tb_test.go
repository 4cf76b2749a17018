package ringtest

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
)

func TestStandaloneRunsCleanupsAndReportsFailures(t *testing.T) {
	var out bytes.Buffer
	var order []string
	var dir string
	err := Run(&out, func(tb *Standalone) {
		dir = tb.TempDir()
		tb.Cleanup(func() { order = append(order, "first") })
		tb.Cleanup(func() { order = append(order, "second") })
		tb.Fatalf("stop here %d", 1)
		order = append(order, "not reached")
	})
	if !errors.Is(err, ErrFatal) {
		t.Fatalf("Run = %v, want ErrFatal", err)
	}
	if strings.Join(order, ",") != "second,first" {
		t.Fatalf("cleanups ran as %v", order)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("temp dir %s survived: %v", dir, err)
	}
	if !strings.Contains(out.String(), "stop here 1") {
		t.Fatalf("log = %q", out.String())
	}
	if err := Run(&out, func(tb *Standalone) { tb.Errorf("soft") }); !errors.Is(err, ErrFailed) {
		t.Fatalf("Run after Errorf = %v, want ErrFailed", err)
	}
}

// TestStandaloneDrivesACluster is how a benchmark program uses the harness outside go test.
func TestStandaloneDrivesACluster(t *testing.T) {
	var out bytes.Buffer
	err := Run(&out, func(tb *Standalone) {
		c := NewCluster(tb, Options{})
		c.AddWorker("a")
		c.WaitSettled(settleWait)
		c.WaitRenewals(1, settleWait)
		if vs := c.CheckHistory(); len(vs) > 0 {
			tb.Errorf("violations: %v", vs)
		}
	})
	if err != nil {
		t.Fatalf("Run = %v\n%s", err, out.String())
	}
}
