package downstream

import (
	"context"
	"testing"
	"time"

	"github.com/retryring/retryring/window"
	"github.com/retryring/retryring/worker"
	"github.com/retryring/retryring/worker/executor"
)

// TestTheHTTPExecutorsCallsReadAsTheContract: the stub's Request and header reading are a second
// reading of the executor contract, written apart from worker/executor on purpose (see Request).
// This checks that the two readings agree today: a call of the HTTP executor, every field of its
// task set, is accepted, and the stub reads back the step and the attempt the task named.
func TestTheHTTPExecutorsCallsReadAsTheContract(t *testing.T) {
	s := start(t, Config{})
	ex, err := executor.NewHTTP(executor.HTTPConfig{URL: s.URL()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := window.Of(time.Date(2026, 3, 9, 10, 17, 0, 0, time.UTC), 5)
	if err != nil {
		t.Fatal(err)
	}
	task := worker.Task{
		TransactionID: "tx-1", ServiceName: "orders", Region: "eu", Cluster: "c1", InstanceID: "pod-7",
		AllocationKey: "alloc-3", ImplType: "Payment", Attempt: 2, Replay: 1, Window: w,
		WorkerID: "w-2", LeaseEpoch: 41,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out := ex.Execute(ctx, task); out.Kind != worker.Done || out.Status != 200 {
		t.Fatalf("Execute = %+v, want done with 200", out)
	}
	if v := s.Violations(); len(v) != 0 {
		t.Fatalf("the stub found the executor's call against the contract: %+v", v)
	}
	es := s.Executions()
	if len(es) != 1 {
		t.Fatalf("%d executions recorded, want 1", len(es))
	}
	wantReq := Request{
		TransactionID: "tx-1", ServiceName: "orders", Region: "eu", Cluster: "c1", InstanceID: "pod-7",
		AllocationKey: "alloc-3", ImplType: "Payment", Replay: 1,
	}
	wantCall := Call{Attempt: 2, WorkerID: "w-2", LeaseEpoch: 41, WindowDate: "2026-03-09", WindowMinute: 615}
	if es[0].Request != wantReq || es[0].Call != wantCall {
		t.Errorf("the stub read\n  %+v %+v\nwant\n  %+v %+v", es[0].Request, es[0].Call, wantReq, wantCall)
	}
	if got, want := es[0].Key(), executor.IdempotencyKey(task.TransactionID, task.ImplType, task.Replay); got != want {
		t.Errorf("the stub's key %q, the executor's %q", got, want)
	}
}
