package clockcheck

import (
	"context"
	"testing"
	"time"

	"github.com/retryring/retryring/testkit/cassandratest"
)

// skewed is the system clock moved by a fixed amount.
type skewed time.Duration

func (s skewed) Now() time.Time { return time.Now().Add(time.Duration(s)) }

// TestCassandraProberMeasuresSkew: against the real Cassandra on this machine, a clock set 3 s
// ahead is measured about 3 s ahead (Cassandra's offset −3 s) within the uncertainty the estimate
// states, and judged untrusted for a 2 s bound; the unskewed clock is trusted.
func TestCassandraProberMeasuresSkew(t *testing.T) {
	s := cassandratest.Session(t)
	ctx := context.Background()
	for _, c := range []struct {
		skew    time.Duration
		trusted bool
	}{{0, true}, {3 * time.Second, false}} {
		m, err := NewMonitor(Config{Prober: NewCassandraProber(s, skewed(c.skew)), Clock: skewed(c.skew)})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Measure(ctx); err != nil {
			t.Fatal(err)
		}
		st := m.Status()
		// Cassandra runs on this machine's clock: the true offset is −skew.
		if d := st.Estimate.Offset + c.skew; d > st.Estimate.Uncertainty+time.Millisecond || -d > st.Estimate.Uncertainty+time.Millisecond {
			t.Errorf("skew %v: estimate %v does not bracket %v", c.skew, st.Estimate, -c.skew)
		}
		if st.Trusted != c.trusted || st.Estimate.Hosts != 1 || st.Estimate.Host == "" {
			t.Errorf("skew %v: %+v, want trusted %v, one host named", c.skew, st, c.trusted)
		}
	}
}
