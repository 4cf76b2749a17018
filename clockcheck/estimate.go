package clockcheck

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Sample is one query of a server's clock: the local clock read just before the query was sent and
// just after its answer arrived, and what the server said. The server's reading is truncated to
// Resolution (Cassandra's toUnixTimestamp gives milliseconds): its clock was in
// [Server, Server+Resolution) when it answered.
type Sample struct {
	Host       string
	Sent       time.Time
	Received   time.Time
	Server     time.Time
	Resolution time.Duration
}

// rtt is the round trip the local clock saw; negative when the clock was stepped back meanwhile.
func (s Sample) rtt() time.Duration { return s.Received.Sub(s.Sent) }

// Estimate is a process's clock offset from one server (the median of those measured): Offset is server − local (positive when the
// local clock is behind), and the true offset lies within Offset ± Uncertainty. At is the local
// reading, with its monotonic part, taken before the measurement's first query: a wall-clock step
// after it (during the measurement or since) shows between At and a later reading (Check).
// Hosts counts the servers that answered.
type Estimate struct {
	Host        string
	Offset      time.Duration
	Uncertainty time.Duration
	Hosts       int
	At          time.Time
	// Spread is how far apart two of the hosts' clocks may be (the widest difference of their
	// offsets plus both uncertainties); zero with one host.
	Spread time.Duration
}

// Worst is how far the local clock may be from the server's: |Offset| + Uncertainty.
func (e Estimate) Worst() time.Duration {
	off := e.Offset
	if off < 0 {
		off = -off
	}
	return off + e.Uncertainty
}

// String is the estimate as logs and errors give it: the offset signed (positive: the local clock
// is behind Cassandra's).
func (e Estimate) String() string {
	sign := ""
	if e.Offset >= 0 {
		sign = "+"
	}
	return fmt.Sprintf("%s%v ± %v from Cassandra host %s", sign, e.Offset.Round(time.Microsecond), e.Uncertainty.Round(time.Microsecond), e.Host)
}

// EstimateFrom turns samples into an estimate, at the local reading at taken before the first.
// Per host it keeps the sample with the least round trip (the query's time on the wire is
// unknown, so the server's reading is taken to be the round trip's midpoint, off by at most half
// of it); of the hosts, it returns the median by offset (of two middle ones, the wider bound), so
// that one host with a bad clock neither untrusts every process nor decides alone, and Spread
// says how far apart the hosts' clocks may be. A sample whose local clock went backwards is
// dropped. ErrNoSample when none is left.
func EstimateFrom(samples []Sample, at time.Time) (Estimate, error) {
	best := map[string]Sample{}
	for _, s := range samples {
		if s.rtt() < 0 || s.Resolution < 0 {
			continue
		}
		if b, ok := best[s.Host]; !ok || s.rtt() < b.rtt() {
			best[s.Host] = s
		}
	}
	if len(best) == 0 {
		return Estimate{}, fmt.Errorf("%w: %d samples, none with a forward local clock", ErrNoSample, len(samples))
	}
	hosts := make([]Estimate, 0, len(best))
	for host, s := range best {
		mid := s.Sent.Add(s.rtt() / 2)
		hosts = append(hosts, Estimate{
			Host:        host,
			Offset:      s.Server.Add(s.Resolution / 2).Sub(mid),
			Uncertainty: s.rtt()/2 + s.Resolution/2,
		})
	}
	slices.SortFunc(hosts, func(a, b Estimate) int {
		return cmp.Or(cmp.Compare(a.Offset, b.Offset), cmp.Compare(a.Host, b.Host))
	})
	median := hosts[len(hosts)/2]
	if lower := hosts[(len(hosts)-1)/2]; lower.Worst() > median.Worst() {
		median = lower
	}
	for i, a := range hosts {
		for _, b := range hosts[i+1:] {
			// b.Offset ≥ a.Offset: b's clock is that much ahead of a's, each within its uncertainty.
			median.Spread = max(median.Spread, b.Offset-a.Offset+a.Uncertainty+b.Uncertainty)
		}
	}
	median.Hosts = len(hosts)
	median.At = at
	return median, nil
}

// Status is the verdict on a process's clock at one instant.
type Status struct {
	// Trusted: a fresh estimate whose Worst is within Limit.
	Trusted bool
	// Measured: Estimate holds a measurement (else there has been none yet).
	Measured bool
	Estimate Estimate
	// Age is how old the estimate is by the local monotonic clock.
	Age time.Duration
	// Step is how far the local wall clock was stepped since the estimate's measurement began (its
	// elapsed time minus the monotonic one; positive: forward).
	Step time.Duration
	// Stepped: the wall clock was stepped too far for the estimate to hold; measure again now.
	Stepped bool
	// Limit is max_clock_offset / 2: how far from Cassandra a process may be.
	Limit time.Duration
	// Reason says why the clock is not trusted; empty when it is.
	Reason string
}

// Err is nil for a trusted clock, else ErrClockUntrusted wrapped with the reason.
func (s Status) Err() error {
	if s.Trusted {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrClockUntrusted, s.Reason)
}

// Check judges estimate e (measured is false when there is none) at the local reading now, for a
// bound maxClockOffset between any two processes: a process may be maxClockOffset / 2 from
// Cassandra. e.At and now should carry Go's monotonic reading (time.Now's): the estimate's age is
// the monotonic time since it, which no step of the wall clock moves, and the wall clock's own
// elapsed time beside it tells whether the wall clock was stepped since the measurement began.
func Check(e Estimate, measured bool, now time.Time, maxClockOffset, staleAfter time.Duration) Status {
	// Sub uses the monotonic readings when both times carry one; Round(0) strips them.
	return judgeElapsed(e, measured, now.Round(0).Sub(e.At.Round(0)), now.Sub(e.At), maxClockOffset, staleAfter)
}

// judgeElapsed is Check given both elapsed times since e.At: by the wall clock (what windows and
// write stamps use) and by the monotonic clock (which an NTP step, a VM resume or `date` does not
// move). Their difference is how far the wall clock was stepped since the measurement began, and
// so how far the offset measured then is from the offset now. An estimate older than staleAfter
// is no estimate; nor is one whose wall clock went back past it, or was stepped by more than the
// bound leaves it (Limit − Worst): Stepped asks for a new measurement at once.
func judgeElapsed(e Estimate, measured bool, wallAge, monoAge, maxClockOffset, staleAfter time.Duration) Status {
	s := Status{Measured: measured, Estimate: e, Limit: maxClockOffset / 2}
	if !measured {
		s.Reason = "no measurement of the clock offset from Cassandra yet"
		return s
	}
	s.Age, s.Step = monoAge, wallAge-monoAge
	step := s.Step
	if step < 0 {
		step = -step
	}
	switch {
	case wallAge < 0:
		s.Stepped = true
		s.Reason = fmt.Sprintf("the local clock went back %v since the offset was measured (%v)", -wallAge, e)
	case s.Age > staleAfter:
		s.Reason = fmt.Sprintf("the last offset measurement (%v) is %v old, more than the %v it is trusted for", e, s.Age.Round(time.Millisecond), staleAfter)
	case e.Worst() > s.Limit:
		s.Reason = fmt.Sprintf("clock offset %v is beyond the bound: max_clock_offset %v allows %v per process", e, maxClockOffset, s.Limit)
	case step > s.Limit-e.Worst():
		s.Stepped = true
		s.Reason = fmt.Sprintf("the local wall clock was stepped %v since the offset was measured (%v), more than the %v the bound leaves; measuring again",
			s.Step, e, s.Limit-e.Worst())
	default:
		s.Trusted = true
	}
	return s
}
