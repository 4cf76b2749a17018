package clockcheck

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/lease"
)

// queriesPerHost is how many samples a measurement takes of each host: the least round trip of a
// few is much tighter than one (a GC pause or a busy coordinator inflates single queries).
const queriesPerHost = 3

// maxQueries bounds one measurement's queries however large the cluster.
const maxQueries = 48

// CassandraProber samples the clocks of the Cassandra hosts a session is connected to. gocql v1.7.0
// cannot pin a query to a host, so it spreads queries that carry no routing key (the policy's
// round robin) and learns from the driver's observer which host answered each.
type CassandraProber struct {
	session *gocql.Session
	clock   lease.Clock
}

// NewCassandraProber returns a prober over session whose local readings come from clock.
func NewCassandraProber(session *gocql.Session, clock lease.Clock) *CassandraProber {
	if clock == nil {
		clock = lease.SystemClock{}
	}
	return &CassandraProber{session: session, clock: clock}
}

// hostObserver remembers the host that answered a query.
type hostObserver struct {
	mu   sync.Mutex
	host string
}

func (o *hostObserver) ObserveQuery(_ context.Context, q gocql.ObservedQuery) {
	if q.Host == nil || q.Err != nil {
		return
	}
	o.mu.Lock()
	o.host = q.Host.ConnectAddressAndPort()
	o.mu.Unlock()
}

// Probe queries each host a few times: SELECT toUnixTimestamp(now()) FROM system.local, the local
// clock read just before and just after. A query that fails is skipped; ErrNoSample if all did.
func (p *CassandraProber) Probe(ctx context.Context) ([]Sample, error) {
	hosts := 1
	var peer string
	iter := p.session.Query("SELECT peer FROM system.peers").WithContext(ctx).Iter()
	for iter.Scan(&peer) {
		hosts++
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("%w: listing Cassandra's hosts: %w", ErrNoSample, err)
	}
	n := min(queriesPerHost*hosts, maxQueries)
	samples := make([]Sample, 0, n)
	var lastErr error
	for range n {
		obs := &hostObserver{}
		var ms int64
		q := p.session.Query("SELECT toUnixTimestamp(now()) FROM system.local").WithContext(ctx).
			Consistency(gocql.One).Observer(obs).Idempotent(false)
		// Wall readings only: a step of the wall clock during the query shows in the round trip
		// (and widens the uncertainty, or drops the sample) instead of being hidden by the
		// monotonic reading that Sub would use.
		sent := p.clock.Now().Round(0)
		err := q.Scan(&ms)
		received := p.clock.Now().Round(0)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%w: %w", ErrNoSample, ctx.Err())
			}
			lastErr = err
			continue
		}
		obs.mu.Lock()
		host := obs.host
		obs.mu.Unlock()
		samples = append(samples, Sample{Host: host, Sent: sent, Received: received, Server: time.UnixMilli(ms), Resolution: time.Millisecond})
	}
	if len(samples) == 0 {
		return nil, fmt.Errorf("%w: %d queries failed, the last with: %w", ErrNoSample, n, lastErr)
	}
	return samples, nil
}
