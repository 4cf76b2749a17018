package recorder

import (
	"testing"

	"github.com/gocql/gocql"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
)

func TestMetrics(t *testing.T) {
	// No statement is sent: the session is never used.
	st, err := cassandra.NewStore(&gocql.Session{}, cassandra.StoreConfig{
		Keyspace: "ks", Ring: lease.RingKey{Region: "r", Cluster: "c", Service: "s"}, WindowMinutes: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The zero session reads as consistency ANY: no statement runs here.
	// Unchecked and weak: a store that never reaches Cassandra, only its counters are read.
	rec, err := New(st, Config{InstanceID: "pod", AllowWeakConsistency: true, UncheckedClock: true})
	if err != nil {
		t.Fatal(err)
	}
	rec.failures.Add(3)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(NewMetrics(rec)); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		if c := m.GetCounter(); c != nil {
			got[mf.GetName()] = c.GetValue()
		} else {
			got[mf.GetName()] = m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{
		"retryring_recorder_failures_total":        3,
		"retryring_recorder_errors_total":          0,
		"retryring_recorder_statements_total":      0,
		"retryring_recorder_cached_directory_rows": 0,
		"retryring_recorder_clock_refusals_total":  0,
	}
	if len(got) != len(want) {
		t.Fatalf("metrics %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}
