package lease

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// RingKey names a ring: one per (region, cluster, service).
type RingKey struct {
	Region  string `json:"region"`
	Cluster string `json:"cluster"`
	Service string `json:"service"`
}

func (k RingKey) String() string { return k.Region + "/" + k.Cluster + "/" + k.Service }

// MaxRingNameBytes bounds each of a ring's names. Every ring a SETUP names is committed to the
// Raft log and kept in every coordinator's state, so a client must not be able to make them
// arbitrarily large; Cassandra's partition keys hold these names too.
const MaxRingNameBytes = 128

// Validate refuses empty names, names longer than MaxRingNameBytes and names that are not UTF-8.
// Why UTF-8: every command and answer that names a ring is JSON, which replaces invalid bytes
// with U+FFFD, so a ring named by other bytes (an admin call's URL path may carry any) would be
// committed under another name than the one the caller gave and the leader checked.
func (k RingKey) Validate() error {
	if k.Region == "" || k.Cluster == "" || k.Service == "" {
		return fmt.Errorf("%w: region, cluster and service must all be set (got %q)", ErrBadRequest, k.String())
	}
	if len(k.Region) > MaxRingNameBytes || len(k.Cluster) > MaxRingNameBytes || len(k.Service) > MaxRingNameBytes {
		return fmt.Errorf("%w: region, cluster and service are limited to %d bytes each", ErrBadRequest, MaxRingNameBytes)
	}
	if !utf8.ValidString(k.Region) || !utf8.ValidString(k.Cluster) || !utf8.ValidString(k.Service) {
		return fmt.Errorf("%w: region, cluster and service must be UTF-8 (got %q)", ErrBadRequest, k.String())
	}
	return nil
}

// Lease is what a worker holds: its ranges of a ring, usable from ValidFrom for TTL on the
// worker's own monotonic clock. ValidFrom is the moment the worker sent the demand that the
// coordinator's element answered, never the moment the element arrived.
type Lease struct {
	WorkerID   string
	Ring       RingKey
	NodeIndex  int
	NodeCount  int
	Epoch      uint64
	Generation uint64
	Ranges     Ranges
	TTL        time.Duration
	ValidFrom  time.Time
	// Renewal is how often the coordinator renews this lease (renewal_ms of the element, 0 from
	// a coordinator that predates it). TTL − 2 × Renewal is the least validity the worker holds
	// in steady state: what its timeouts must fit in (LeastValidity).
	Renewal time.Duration
	// Controls are the ring's flow controls in force, for a client that announced
	// FeatureControls; nil otherwise.
	Controls *Controls
}

// LeastValidity is the least lease a worker holds in steady state: a demand is answered at the
// next renewal at the latest, so a lease is renewed with at most TTL − 2 × Renewal left. Zero when
// the element did not say its renewal.
func (l Lease) LeastValidity() time.Duration {
	if l.Renewal <= 0 {
		return 0
	}
	return l.TTL - 2*l.Renewal
}

// ExpiresAt is the instant the lease stops being usable on the worker's clock.
func (l Lease) ExpiresAt() time.Time { return l.ValidFrom.Add(l.TTL) }

// Remaining is how long the lease is still usable at now (zero or negative once expired).
func (l Lease) Remaining(now time.Time) time.Duration { return l.ExpiresAt().Sub(now) }

// IsNode0 reports whether this lease makes its holder Node-0, the directory compactor.
func (l Lease) IsNode0() bool { return l.NodeIndex == 0 }

// Timing is the lease timing of product.md. The zero value of each field means its default.
//
// The defaults leave a worker at least TTL − 2 × Renewal = 6 s of lease in steady state: room
// for a 5 s downstream call plus the guard's margin, and for a leader failover of a few seconds
// (invariant 4). The price is a takeover after a crash of about one TTL. Tests and demos that
// need faster takeovers set a shorter timing and say why.
type Timing struct {
	// TTL is how long a worker may use a lease element, from the moment it sent the demand. Default 10s.
	TTL time.Duration
	// Renewal is how often the coordinator answers outstanding demand with a fresh element. Default 2s.
	Renewal time.Duration
	// Drift (ρ) bounds the relative rate error between two clocks. Default 0.001.
	Drift float64
	// Margin is added to every coordinator-side expiry. Default 100ms.
	Margin time.Duration
}

// Defaults of Timing.
const (
	DefaultTTL     = 10 * time.Second
	DefaultRenewal = 2 * time.Second
	DefaultDrift   = 0.001
	DefaultMargin  = 100 * time.Millisecond
)

// WithDefaults fills zero fields with the defaults.
func (t Timing) WithDefaults() Timing {
	if t.TTL == 0 {
		t.TTL = DefaultTTL
	}
	if t.Renewal == 0 {
		t.Renewal = DefaultRenewal
	}
	if t.Drift == 0 {
		t.Drift = DefaultDrift
	}
	if t.Margin == 0 {
		t.Margin = DefaultMargin
	}
	return t
}

// Validate checks that renewals come well inside the TTL.
func (t Timing) Validate() error {
	t = t.WithDefaults()
	switch {
	case t.TTL < 0 || t.Renewal < 0 || t.Margin < 0 || t.Drift < 0:
		return fmt.Errorf("lease timing: negative value in %+v", t)
	case t.Renewal > t.TTL/2: // not Renewal*2 > TTL: that product can overflow and pass
		return fmt.Errorf("lease timing: renewal %v must be at most half the TTL %v", t.Renewal, t.TTL)
	case !(t.Drift < 0.1): // written so that NaN is refused too
		return fmt.Errorf("lease timing: drift %v is not a clock rate error", t.Drift)
	case float64(t.TTL)*(1+t.Drift)+float64(t.Margin) >= math.MaxInt64:
		return fmt.Errorf("lease timing: TTL %v and margin %v overflow the holder bound", t.TTL, t.Margin)
	}
	return nil
}

// HolderBound is how long after sending an element at sent (coordinator clock) the coordinator must
// treat that element as possibly in use: TTL×(1+ρ) + margin. The drift term is rounded up to the
// next nanosecond: float64(TTL)×(1+ρ) truncated would come out a nanosecond short of the contract
// (3s×1.001 is 3.0029999999999995e9 in binary floating point), and a short bound is the unsafe side.
func (t Timing) HolderBound() time.Duration {
	t = t.WithDefaults()
	return t.TTL + time.Duration(math.Ceil(float64(t.TTL)*t.Drift)) + t.Margin
}

// PossiblyAliveUntil is the coordinator-side end of an element sent at sent.
func (t Timing) PossiblyAliveUntil(sent time.Time) time.Time { return sent.Add(t.HolderBound()) }

// ParseRing reads a ring key written REGION/CLUSTER/SERVICE, as flags and token files give it.
func ParseRing(s string) (RingKey, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return RingKey{}, fmt.Errorf("want REGION/CLUSTER/SERVICE, got %.140q", s)
	}
	k := RingKey{Region: parts[0], Cluster: parts[1], Service: parts[2]}
	if err := k.Validate(); err != nil {
		return RingKey{}, fmt.Errorf("ring %.140q: %w", s, err)
	}
	return k, nil
}
