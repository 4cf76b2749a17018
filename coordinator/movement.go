package coordinator

import (
	"fmt"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

func movementView(r *fsm.Ring) admin.MovementView {
	v := admin.MovementView{Mode: r.Mode()}
	if r == nil || r.Movement == nil {
		return v
	}
	cfg := r.Movement.Config()
	v.Tolerance, v.MaxRanges, v.SinceMs = cfg.Tolerance, cfg.MaxRanges, r.Movement.SinceMs
	v.ReturnDelayMs, v.IdleMs, v.StepMoves = cfg.ReturnDelay.Milliseconds(), cfg.Idle.Milliseconds(), cfg.StepMoves
	for _, s := range r.Reservations() {
		v.Reserved = append(v.Reserved, s.WorkerID)
	}
	return v
}

// movementCommand is the SetMovement of a movement call (POST admin.PathRings...movement): the
// mode and its parameters are checked here, against the replicated state's modes and bounds; bad
// input is lease.ErrBadRequest.
func movementCommand(ring lease.RingKey, req admin.MovementRequest, atMs int64) (*fsm.SetMovement, error) {
	c := &fsm.SetMovement{Ring: ring, Mode: req.Mode, AtMs: atMs}
	switch {
	case req.Mode != fsm.ModeMinimal && req.Mode != fsm.ModeContiguous:
		return nil, fmt.Errorf(`%w: mode %q: send {"mode": "minimal"} (with "tolerance" and "max_ranges" if not the defaults) or {"mode": "contiguous"}`,
			lease.ErrBadRequest, req.Mode)
	case req.Mode == fsm.ModeContiguous && (req.Tolerance != nil || req.MaxRanges != nil || req.ReturnDelayMs != nil || req.IdleMs != nil || req.StepMoves != nil):
		return nil, fmt.Errorf("%w: tolerance, max_ranges, return_delay_ms, idle_ms and step_moves are parameters of the minimal mode; the contiguous mode takes none", lease.ErrBadRequest)
	}
	if req.Tolerance != nil {
		if !(*req.Tolerance > 0) {
			return nil, fmt.Errorf("%w: tolerance must be above 0 (at most 0.5), got %v", lease.ErrBadRequest, *req.Tolerance)
		}
		c.Tolerance = *req.Tolerance
	}
	if req.MaxRanges != nil {
		if *req.MaxRanges < 1 {
			return nil, fmt.Errorf("%w: max_ranges must be at least 1, got %d", lease.ErrBadRequest, *req.MaxRanges)
		}
		c.MaxRanges = *req.MaxRanges
	}
	// 0 would mean the default in the command: a 0 sent here is out of bounds, not a default.
	if req.ReturnDelayMs != nil {
		if *req.ReturnDelayMs == 0 {
			return nil, fmt.Errorf("%w: return_delay_ms must be from %d to %d, got 0", lease.ErrBadRequest, fsm.MinReturnDelay.Milliseconds(), fsm.MaxReturnDelay.Milliseconds())
		}
		c.ReturnDelayMs = *req.ReturnDelayMs
	}
	if req.IdleMs != nil {
		if *req.IdleMs == 0 {
			return nil, fmt.Errorf("%w: idle_ms must be from %d to %d, got 0", lease.ErrBadRequest, fsm.MinIdle.Milliseconds(), fsm.MaxIdle.Milliseconds())
		}
		c.IdleMs = *req.IdleMs
	}
	if req.StepMoves != nil {
		if *req.StepMoves < 1 {
			return nil, fmt.Errorf("%w: step_moves must be from 1 to %d, got %d", lease.ErrBadRequest, fsm.MaxStepMoves, *req.StepMoves)
		}
		c.StepMoves = *req.StepMoves
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", lease.ErrBadRequest, err)
	}
	return c, nil
}
