package demo

import "errors"

var (
	// ErrInvalidConfig means a Config failed validation.
	ErrInvalidConfig = errors.New("demo: invalid configuration")
	// ErrCassandraUnreachable means Cassandra did not answer and the demo could not start one
	// (no scripts/cassandra.sh nearby, or the address is not on this machine).
	ErrCassandraUnreachable = errors.New("demo: Cassandra is not reachable")
	// ErrLost means at the end of the run some recorded transaction was neither done nor
	// dead-lettered.
	ErrLost = errors.New("demo: recorded transactions were lost")
	// ErrInterrupted means the run was stopped (Ctrl-C) before the drain ended.
	ErrInterrupted = errors.New("demo: interrupted")
)
