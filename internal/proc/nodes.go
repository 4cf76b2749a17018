package proc

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/retryring/retryring/coordinator/admin"
)

// Coordinator is one coordinator process.
type Coordinator struct {
	*Process
	ID          string
	RaftAddr    string
	RSocketAddr string
	HTTPAddr    string
	DataDir     string
	// https: the admin port speaks TLS (Options.AdminTLS).
	https bool
}

// Args is the command line that starts c as a voter of a cluster whose voters are peers
// ("id=raft_addr" each); a caller appends its own flags.
func (c *Coordinator) Args(peers []string) []string {
	return []string{
		"coordinator", "--node-id", c.ID, "--raft-addr", c.RaftAddr, "--rsocket-addr", c.RSocketAddr,
		"--http-addr", c.HTTPAddr, "--data-dir", c.DataDir, "--peers", strings.Join(peers, ","),
	}
}

// URL is the admin HTTP URL of path ("/v1/ring").
func (c *Coordinator) URL(path string) string {
	if c.https {
		return "https://" + c.HTTPAddr + path
	}
	return "http://" + c.HTTPAddr + path
}

// View fetches GET /v1/ring.
func (c *Coordinator) View(ctx context.Context) (admin.RingView, error) {
	var v admin.RingView
	err := getJSON(ctx, c.URL("/v1/ring"), &v)
	return v, err
}

// Ready reports whether GET /readyz answers 200.
func (c *Coordinator) Ready(ctx context.Context) bool {
	status, _, err := get(ctx, c.URL("/readyz"))
	return err == nil && status == http.StatusOK
}

// WaitHealthy waits until /healthz answers 200.
func (c *Coordinator) WaitHealthy(ctx context.Context) error {
	return WaitOK(ctx, c.Process, c.URL("/healthz"))
}

// WaitReady waits until /readyz answers 200.
func (c *Coordinator) WaitReady(ctx context.Context) error {
	return WaitOK(ctx, c.Process, c.URL("/readyz"))
}

// Worker is one worker process.
type Worker struct {
	*Process
	ID       string
	HTTPAddr string
}

// URL is the worker's HTTP URL of path.
func (w *Worker) URL(path string) string { return "http://" + w.HTTPAddr + path }

// WaitHealthy waits until /healthz answers 200.
func (w *Worker) WaitHealthy(ctx context.Context) error {
	return WaitOK(ctx, w.Process, w.URL("/healthz"))
}

// WaitReady waits until /readyz answers 200.
func (w *Worker) WaitReady(ctx context.Context) error {
	return WaitOK(ctx, w.Process, w.URL("/readyz"))
}

// incarnationRE finds the incarnation in the worker's JSON log lines.
var incarnationRE = regexp.MustCompile(`"incarnation":"([^"]+)"`)

// Incarnation is the incarnation the current launch logged (its "worker started" line and every
// lease client line carry it), or "" before it logged one. The lease protocol draws a new one per
// process start, which is how a restarted worker is told from its previous launch.
func (w *Worker) Incarnation() string {
	b, err := os.ReadFile(w.LogPath())
	if err != nil {
		return ""
	}
	launch := []byte(fmt.Sprintf("=== proc: launch %d of ", w.Launches()))
	i := bytes.LastIndex(b, launch)
	if i < 0 {
		return ""
	}
	if m := incarnationRE.FindSubmatch(b[i:]); m != nil {
		return string(m[1])
	}
	return ""
}

// Metrics scrapes /metrics.
func (w *Worker) Metrics(ctx context.Context) (Metrics, error) {
	status, body, err := get(ctx, w.URL("/metrics"))
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d", w.URL("/metrics"), status)
	}
	return ParseMetrics(body), nil
}

// Metrics are samples of the Prometheus text format, keyed by the series as written
// (`name` or `name{label="v",...}`).
type Metrics map[string]float64

// Sum adds every series of the metric name, whatever its labels.
func (m Metrics) Sum(name string) float64 {
	var total float64
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			total += v
		}
	}
	return total
}

// ParseMetrics reads the Prometheus text exposition format (samples only: comments, timestamps
// and malformed lines are skipped).
func ParseMetrics(b []byte) Metrics {
	m := Metrics{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		// The series may hold spaces inside label values: the value follows the last '}' if any.
		var series, rest string
		if i := strings.LastIndexByte(line, '}'); i >= 0 {
			series, rest = line[:i+1], strings.TrimSpace(line[i+1:])
		} else {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			series, rest = f[0], strings.Join(f[1:], " ")
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		m[series] = v
	}
	return m
}
