package helm

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/internal/downstream"
	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/testkit/cassandratest"
)

var (
	metricName = regexp.MustCompile(`\bretryring_[a-z0-9_]+\b`)
	// selectorRE is a metric with a label selector: name{label="v",label=~"a|b"}.
	selectorRE = regexp.MustCompile(`\b(retryring_[a-z0-9_]+)\{([^}]*)\}`)
	matcherRE  = regexp.MustCompile(`(\w+)\s*(=~|=)\s*"([^"]*)"`)
	byRE       = regexp.MustCompile(`\bby\s*\(([^)]*)\)`)
	labelRE    = regexp.MustCompile(`(\w+)="`)
)

// queries are the PromQL expressions of the dashboard (panel targets, template variables) and of
// the alert rules (rendered with metrics.prometheusRule.enabled).
func queries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir(), "dashboards", "retryring.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	var out []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if v.Definition != "" {
			out = append(out, v.Definition)
		}
	}
	ms := render(t, withAuth("--set", "metrics.prometheusRule.enabled=true")...)
	for _, g := range find(t, ms, "PrometheusRule", "retryring").Spec.Groups {
		for _, r := range g.Rules {
			out = append(out, r.Expr)
		}
	}
	return out
}

// series is one scrape: every sample's series as written, by metric name.
type series map[string][]string

func scrape(ctx context.Context, t *testing.T, url string) series {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	out := series{}
	for k := range proc.ParseMetrics(b) {
		name, _, _ := strings.Cut(k, "{")
		out[name] = append(out[name], k)
	}
	return out
}

// TestDashboardMetricsExist: every metric the Grafana dashboard and the alert rules query is
// exported by a running coordinator or a running worker (real processes against the real
// Cassandra, after the worker executed some failures and reported, so that the ring, backlog
// and breaker series exist); every literal label value a selector names exists, and every label
// an aggregation groups by is a label of a metric of its expression.
func TestDashboardMetricsExist(t *testing.T) {
	qs := queries(t)
	want := map[string]bool{}
	for _, q := range qs {
		for _, m := range metricName.FindAllString(q, -1) {
			want[m] = true
		}
	}
	if len(want) < 30 {
		t.Fatalf("the dashboard and rules query only %d metrics: %v", len(want), want)
	}

	ks := "t_helm_metrics_" + strings.ReplaceAll(time.Now().UTC().Format("150405.000000"), ".", "")
	sess := cassandratest.Session(t)
	t.Cleanup(func() {
		if err := sess.Query("DROP KEYSPACE IF EXISTS " + ks).Exec(); err != nil {
			t.Errorf("drop keyspace %s: %v", ks, err)
		}
	})
	g, err := proc.GroupIn(filepath.Join(t.TempDir(), "logs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl, err := proc.StartCluster(ctx, g, proc.Options{
		Binary: binary, Coordinators: 1, Workers: 1, Keyspace: ks, Cassandra: cassandratest.Addr(),
		Downstream: downstream.Config{PermanentFraction: 0.2},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	if _, err := cl.Record(ctx, proc.RecordOptions{Count: 20, Instances: 1, Backdate: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	co, w := cl.Coordinators()[0], cl.Workers()[0]

	// Ring, backlog and breaker series appear once the worker executed and reported.
	var cs, ws series
	for {
		cs, ws = scrape(ctx, t, co.URL("/metrics")), scrape(ctx, t, w.URL("/metrics"))
		if len(cs["retryring_coordinator_backlog_age_seconds"]) > 0 && len(ws["retryring_worker_breaker_state"]) > 0 &&
			len(cs["retryring_coordinator_executions_per_second"]) > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no backlog or breaker series yet: coordinator %d families, worker %d\n%s", len(cs), len(ws), w.Tail(20))
		case <-time.After(500 * time.Millisecond):
		}
	}
	have := func(name string) []string {
		if strings.HasPrefix(name, "retryring_worker_") {
			return ws[name]
		}
		return cs[name]
	}
	for name := range want {
		if len(have(name)) == 0 {
			t.Errorf("%s is queried but not in /metrics of the %s", name,
				map[bool]string{true: "worker", false: "coordinator"}[strings.HasPrefix(name, "retryring_worker_")])
		}
	}
	for _, q := range qs {
		for _, sel := range selectorRE.FindAllStringSubmatch(q, -1) {
			name := sel[1]
			for _, m := range matcherRE.FindAllStringSubmatch(sel[2], -1) {
				label, value := m[1], m[3]
				if strings.ContainsAny(value, "$*+?[](){}\\") { // a dashboard variable or a pattern
					continue
				}
				for _, alt := range strings.Split(value, "|") {
					needle := label + `="` + alt + `"`
					if !slices.ContainsFunc(have(name), func(s string) bool { return strings.Contains(s, needle) }) {
						t.Errorf("%q selects %s{%s}: no such series in %v", q, name, needle, have(name))
					}
				}
			}
		}
		for _, by := range byRE.FindAllStringSubmatch(q, -1) {
			for _, label := range strings.Split(by[1], ",") {
				label = strings.TrimSpace(label)
				found := false
				for _, name := range metricName.FindAllString(q, -1) {
					for _, s := range have(name) {
						for _, l := range labelRE.FindAllStringSubmatch(s, -1) {
							found = found || l[1] == label
						}
					}
				}
				if !found {
					t.Errorf("%q groups by %q, a label none of its metrics has", q, label)
				}
			}
		}
	}
}
