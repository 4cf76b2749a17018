package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/retryring/retryring/worker"
)

// errUnavailable is the gateway's passing failure: try again later.
var errUnavailable = errors.New("payment gateway unavailable")

// errDeclined is the gateway's final answer: retrying never helps.
var errDeclined = errors.New("card declined")

// gateway stands for the downstream the service calls in process (a client library of a payment
// provider, another module of a modular monolith). It is down until backAt, declines orders
// whose id ends in "7" for good, and is idempotent by order id, as a payment API with
// idempotency keys is: a second charge of one order charges nothing.
type gateway struct {
	backAt time.Time

	mu      sync.Mutex
	charged map[string]int
}

func newGateway(backAt time.Time) *gateway {
	return &gateway{backAt: backAt, charged: map[string]int{}}
}

// Charge charges an order once.
func (g *gateway) Charge(ctx context.Context, orderID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if time.Now().Before(g.backAt) {
		return errUnavailable
	}
	if orderID[len(orderID)-1] == '7' {
		return errDeclined
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.charged[orderID]++
	return nil
}

// Charged counts orders charged; ChargedTwice those a retry reached again (the idempotency key
// made it harmless).
func (g *gateway) Charged() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.charged)
}

func (g *gateway) ChargedTwice() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, c := range g.charged {
		if c > 1 {
			n++
		}
	}
	return n
}

// chargeExecutor is the service's worker.Executor: a retry of a "ChargePayment" step calls the
// gateway in process, instead of the retryring binary's HTTP POST. The transaction id is the
// order id, so the gateway's idempotency covers a retry that runs twice (a worker killed after
// the charge and before its COMMITTED marker).
type chargeExecutor struct{ gw *gateway }

func (e chargeExecutor) Execute(ctx context.Context, t worker.Task) worker.Outcome {
	if t.ImplType != "ChargePayment" {
		// A step this version does not know: never guess, give it up for an operator.
		return worker.Outcome{Kind: worker.Permanent, Err: fmt.Errorf("unknown step %q", t.ImplType)}
	}
	switch err := e.gw.Charge(ctx, t.TransactionID); {
	case err == nil:
		return worker.Outcome{Kind: worker.Done}
	case errors.Is(err, errDeclined):
		return worker.Outcome{Kind: worker.Permanent, Err: err} // dead-lettered at once
	default:
		return worker.Outcome{Kind: worker.Transient, Err: err} // recorded again, a window later
	}
}
