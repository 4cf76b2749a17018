package coordinator

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryring/retryring/lease"
)

// The ring page as a person sees it: Debian's chromium, headless, loads it from a running
// coordinator. `make test` installs chromium and sets RETRYRING_REQUIRE_BROWSER, so that there a
// missing browser fails the test instead of skipping it. RETRYRING_CHROMIUM names another
// binary; RETRYRING_PAGE_SCREENSHOT keeps the screenshot at that path.

func chromiumBinary(t *testing.T) string {
	t.Helper()
	names := []string{"chromium", "chromium-browser", "google-chrome"}
	if p := os.Getenv("RETRYRING_CHROMIUM"); p != "" {
		names = []string{p}
	}
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("RETRYRING_REQUIRE_BROWSER") != "" {
		t.Fatalf("no %v on PATH, and RETRYRING_REQUIRE_BROWSER is set (make test installs Debian's chromium)", names)
	}
	t.Skipf("no %v on PATH (make test installs Debian's chromium)", names)
	return ""
}

// runChromium runs a headless chromium with args and returns what it printed.
func runChromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// --no-sandbox: tests run as root in CI, where chromium refuses its sandbox; the page is ours.
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--hide-scrollbars", "--window-size=1280,900", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

// TestRingPageInABrowser: Node-0 reports a draining backlog while the other member never reports.
// The page shows the backlog age as text, a sparkline with points drawn in its colour, and the
// silent member marked "report unknown". Node-0 reports a clock 1.2 s behind Cassandra's, beyond
// the 1 s a process may be off: its row shows the offset and marks the clock untrusted.
func TestRingPageInABrowser(t *testing.T) {
	bin := chromiumBinary(t)
	c := newCluster(t, 1, withReportPeriod)
	leader := c.leader()
	w1 := newTestWorker(t, "page-1", leader.RSocketAddr()).start()
	w2 := newTestWorker(t, "page-2", leader.RSocketAddr()).start()
	eventually(t, 15*time.Second, "two members with half the ring each", func() bool {
		l1, ok1 := w1.latest()
		l2, ok2 := w2.latest()
		return ok1 && ok2 && l1.lease.NodeCount == 2 && l2.lease.NodeCount == 2 &&
			l1.lease.Ranges.Union(l2.lease.Ranges).Equal(lease.Ranges{lease.FullRing})
	})
	node0, silent := w1, w2
	if l, _ := w2.latest(); l.lease.IsNode0() {
		node0, silent = w2, w1
	}

	// Node-0 drains: its directory's oldest window moves forward faster than the clock.
	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			oldest := start.Add(-8*time.Minute + time.Duration(i)*20*time.Second)
			if err := node0.report(lease.Report{
				Executions: map[string]uint64{"done": uint64(40 * i), "transient": uint64(i)}, PendingRows: int64(500 - i),
				DirectoryOldestWindowStartMs: oldest.UnixMilli(), OldestWindowStartMs: oldest.UnixMilli(),
				Clock: &lease.ClockReport{OffsetUs: 1_200_000, UncertaintyUs: 300, LimitUs: 1_000_000},
			}); err != nil {
				t.Logf("report: %v", err)
			}
			select {
			case <-stop:
				return
			case <-time.After(testReportPeriod / 2):
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	term := leader.currentTerm()
	eventually(t, 30*time.Second, "three known samples of the backlog age", func() bool {
		known := 0
		for _, s := range term.backlog.series()[testRing.String()] {
			if s.Known {
				known++
			}
		}
		return known >= 3
	})

	url := "http://" + leader.HTTPAddr() + "/?refresh=0"
	dom := string(runChromium(t, bin, "--dump-dom", url))
	age := regexp.MustCompile(`data-ring="eu/c1/orders">(\d+ min \d+ s)</span>`).FindStringSubmatch(dom)
	if age == nil {
		t.Errorf("no backlog age in minutes and seconds on the page:\n%s", dom)
	}
	pts := regexp.MustCompile(`<polyline points="([^"]+)"`).FindStringSubmatch(dom)
	if pts == nil || len(strings.Fields(pts[1])) < 2 {
		t.Errorf("no sparkline of two points or more (%q):\n%s", pts, dom)
	}
	row := regexp.MustCompile(`(?s)<tr class="active reportunknown">.*?</tr>`).FindString(dom)
	if !strings.Contains(row, silent.id) || !strings.Contains(row, "report unknown") || strings.Contains(row, node0.id) {
		t.Errorf("the silent member is not marked (row %q):\n%s", row, dom)
	}
	node0Row := regexp.MustCompile(`(?s)<tr class="active">.*?</tr>`).FindString(dom)
	if !strings.Contains(node0Row, node0.id) || !strings.Contains(node0Row, "clock untrusted") ||
		!strings.Contains(node0Row, "+1200.0 ms ± 0.3 ms (limit ±1000 ms)") {
		t.Errorf("Node-0's row lacks its clock offset marked untrusted (row %q)", node0Row)
	}
	for _, want := range []string{"pending rows", "exec/s done", "dead letters/h", "breakers closed", "1 report unknown", "clock offset"} {
		if !strings.Contains(dom, want) {
			t.Errorf("page lacks %q", want)
		}
	}

	shot := os.Getenv("RETRYRING_PAGE_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "ring.png")
	}
	runChromium(t, bin, "--screenshot="+shot, url)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	// The sparkline's stroke (#1864ab in page.html.tmpl) is drawn: a person sees a line.
	stroke := 0
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if near8(r, 0x18) && near8(g, 0x64) && near8(b, 0xab) {
				stroke++
			}
		}
	}
	if stroke < 20 {
		t.Errorf("%d pixels of the sparkline's colour in the screenshot %s; want a drawn line", stroke, shot)
	}
	t.Logf("backlog age %v, sparkline %q, %d stroke pixels, screenshot %s", age, fmt.Sprint(pts), stroke, shot)
}

// near8 reports whether a 16-bit colour channel is within a few steps of the 8-bit value want.
func near8(v uint32, want int) bool {
	d := int(v>>8) - want
	return d >= -12 && d <= 12
}
