package lease_test

import (
	"math"
	"testing"

	"github.com/retryring/retryring/lease"
)

func TestRangesFraction(t *testing.T) {
	halves := lease.Split(2)
	for _, c := range []struct {
		rs   lease.Ranges
		want float64
	}{
		{nil, 0},
		{lease.Ranges{lease.FullRing}, 1},
		{lease.Ranges{halves[0]}, 0.5},
		{lease.Ranges{halves[1]}, 0.5},
		{lease.Split(4)[1:3], 0.5},
	} {
		if got := c.rs.Fraction(); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%v: %v, want %v", c.rs, got, c.want)
		}
	}
}
