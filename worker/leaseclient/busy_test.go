package leaseclient

import (
	"testing"

	"github.com/rsocket/rsocket-go"
)

// TestDialPlanBusyWaitsForTheHint: busy keeps the normal pacing (not the maximum delay of a
// configuration error) but waits at least the coordinator's retry_after_ms, jittered around it,
// and never longer than the client's own maximum whatever the coordinator says.
func TestDialPlanBusyWaitsForTheHint(t *testing.T) {
	busy := func(ms string) error {
		return wire(rsocket.ErrorCodeRejectedSetup, `{"error":"busy","message":"x","retry_after_ms":`+ms+`}`)
	}
	p := newDialPlan(defaultBackoff, []string{"a:1", "b:1"}, 0, cycle(0.5))
	got := []step{
		// Holding, first retry: at once by the pacing, but the hint of 400 ms: a draw from [200, 600).
		p.step(attemptResult{addr: "a:1", err: busy("400"), got: true, holding: true}),
		// Not holding: full jitter would give 50 ms; the hint wins.
		p.step(attemptResult{addr: "b:1", err: busy("1000")}),
		// A hint above the client's maximum (5 s) is cut to it.
		p.step(attemptResult{addr: "a:1", err: busy("3600000")}),
		// A busy answer without a hint: the normal pacing (doubling, attempt 2 of 100 ms·2^n).
		p.step(attemptResult{addr: "b:1", err: wire(rsocket.ErrorCodeRejectedSetup, `{"error":"busy"}`)}),
	}
	checkSteps(t, "busy", got, []step{{"b:1", 400 * ms, false}, {"a:1", 1000 * ms, false}, {"b:1", 5000 * ms, false}, {"a:1", 200 * ms, false}})
}
