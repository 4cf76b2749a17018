package admin

import (
	"fmt"

	"github.com/retryring/retryring/lease"
)

// ClockText is a member's reported clock offset for people (the ring page, ctl ring): Cassandra's
// clock minus the worker's with its uncertainty, "" when the report carries none. beyond is set
// when the worker judged its clock untrusted, or the figures are past its limit: it is leaving
// the ring, and its host's time sync needs fixing (docs/operations.md, "Clock offset").
func ClockText(c *lease.ClockReport) (text string, beyond bool) {
	if c == nil {
		return "", false
	}
	off, u := float64(c.OffsetUs)/1000, float64(c.UncertaintyUs)/1000
	text = fmt.Sprintf("%+.1f ms ± %.1f ms", off, u)
	worst := c.OffsetUs
	if worst < 0 {
		worst = -worst
	}
	beyond = !c.Trusted || worst+c.UncertaintyUs > c.LimitUs
	if beyond {
		text += fmt.Sprintf(" (limit ±%.0f ms)", float64(c.LimitUs)/1000)
	}
	return text, beyond
}
