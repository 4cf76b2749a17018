package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/retryring/retryring/lease"
)

// timingSpec is one lease timing the run measures, on a cluster of its own: the name the report
// gives it and the TTL and renewal the coordinators are started with.
type timingSpec struct {
	name string
	t    lease.Timing // with defaults filled
}

// Named timings of -timing. "old" is the default before issue 9 (TTL 3 s, renewal 1 s), "new"
// the default since (lease.DefaultTTL, lease.DefaultRenewal), so that one run compares the two
// whatever the defaults become later.
var namedTimings = map[string]lease.Timing{
	"old": {TTL: 3 * time.Second, Renewal: time.Second},
	"new": {TTL: lease.DefaultTTL, Renewal: lease.DefaultRenewal},
}

// parseTimings reads -timing: a comma-separated list of "old", "new" or NAME=TTL/RENEWAL (e.g.
// "fast=5s/1s"). Empty: one timing from -lease-ttl and -lease-renewal (0: the coordinators'
// defaults), named "flags".
func parseTimings(s string, ttl, renewal time.Duration) ([]timingSpec, error) {
	if strings.TrimSpace(s) == "" {
		return []timingSpec{{name: "flags", t: lease.Timing{TTL: ttl, Renewal: renewal}.WithDefaults()}}, nil
	}
	var out []timingSpec
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		var spec timingSpec
		if name, value, ok := strings.Cut(item, "="); ok {
			ttlText, renewalText, ok := strings.Cut(value, "/")
			if !ok || name == "" {
				return nil, fmt.Errorf("-timing %q: want old, new or NAME=TTL/RENEWAL", item)
			}
			t, err := time.ParseDuration(ttlText)
			if err != nil {
				return nil, fmt.Errorf("-timing %q: TTL: %w", item, err)
			}
			r, err := time.ParseDuration(renewalText)
			if err != nil {
				return nil, fmt.Errorf("-timing %q: renewal: %w", item, err)
			}
			spec = timingSpec{name: name, t: lease.Timing{TTL: t, Renewal: r}}
		} else if t, ok := namedTimings[item]; ok {
			spec = timingSpec{name: item, t: t}
		} else {
			return nil, fmt.Errorf("-timing %q: want old, new or NAME=TTL/RENEWAL", item)
		}
		if spec.t.TTL <= 0 || spec.t.Renewal <= 0 || spec.t.Renewal >= spec.t.TTL {
			return nil, fmt.Errorf("-timing %q: want 0 < renewal < TTL", item)
		}
		if seen[spec.name] {
			return nil, fmt.Errorf("-timing: %q named twice", spec.name)
		}
		seen[spec.name] = true
		spec.t = spec.t.WithDefaults()
		out = append(out, spec)
	}
	return out, nil
}

func (s timingSpec) String() string {
	return fmt.Sprintf("%s (TTL %v, renewal %v)", s.name, s.t.TTL, s.t.Renewal)
}
