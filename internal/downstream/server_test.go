package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryring/retryring/testkit/clocktest"
)

func start(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// call is one executor request: the step's body and the headers of one attempt.
type call struct {
	Request
	Call
}

func req(tx, instance, worker string, epoch uint64) call {
	return call{
		Request: Request{TransactionID: tx, ServiceName: "orders", Region: "r", Cluster: "c", InstanceID: instance, ImplType: "Pay"},
		Call:    Call{WindowDate: "2026-01-02", WindowMinute: 5, WorkerID: worker, LeaseEpoch: epoch},
	}
}

// post sends c with the idempotency key key ("": the contract's key for c's step).
func post(t *testing.T, ctx context.Context, url string, c call, key string) int {
	t.Helper()
	body, _ := json.Marshal(c.Request)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key == "" {
		key = c.Key()
	}
	hr.Header.Set(IdempotencyHeader, key)
	hr.Header.Set(AttemptHeader, fmt.Sprint(c.Attempt+1))
	hr.Header.Set(WorkerHeader, c.WorkerID)
	hr.Header.Set(LeaseEpochHeader, fmt.Sprint(c.LeaseEpoch))
	hr.Header.Set(WindowHeader, fmt.Sprintf("%s/%d", c.WindowDate, c.WindowMinute))
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestAnswersAndRecordsEveryExecution(t *testing.T) {
	s := start(t, Config{PermanentIDs: []string{"bad"}})
	ctx := context.Background()
	if got := post(t, ctx, s.URL(), req("tx-1", "pod-1", "w1", 3), ""); got != 200 {
		t.Fatalf("first execution: %d, want 200", got)
	}
	if got := post(t, ctx, s.URL(), req("tx-1", "pod-1", "w1", 3), ""); got != 409 {
		t.Fatalf("repeat of a done transaction: %d, want 409", got)
	}
	if got := post(t, ctx, s.URL(), req("bad", "pod-1", "w1", 3), ""); got != DefaultPermanentStatus {
		t.Fatalf("permanent id: %d, want %d", got, DefaultPermanentStatus)
	}
	es := s.Executions()
	if len(es) != 3 {
		t.Fatalf("%d executions recorded, want 3", len(es))
	}
	for i, e := range es {
		if e.Seq != uint64(i+1) || e.End.Before(e.Start) || e.WorkerID != "w1" || e.LeaseEpoch != 3 || e.InstanceID != "pod-1" {
			t.Errorf("execution %d: %+v", i, e)
		}
	}
	if !es[0].Done() || !es[1].Done() || es[2].Done() {
		t.Errorf("done flags: %v %v %v", es[0].Done(), es[1].Done(), es[2].Done())
	}
	dups := s.Duplicates()
	if len(dups) != 1 || dups[0].TransactionID != "tx-1" || len(dups[0].Execs) != 2 {
		t.Fatalf("duplicates %v", dups)
	}
	sum := s.Summary()
	if sum.Executions != 3 || sum.Transactions != 2 || sum.Done != 1 || sum.ExecutedTwice != 1 || sum.ByStatus[409] != 1 || sum.Violations != 0 {
		t.Fatalf("summary %+v", sum)
	}
	if n := len(s.ExecutionsOf("tx-1")); n != 2 {
		t.Fatalf("ExecutionsOf(tx-1) = %d executions", n)
	}
	if got := s.ExecutionsSince(es[0].Start); len(got) != 2 || got[0].Seq != 2 {
		t.Fatalf("ExecutionsSince the first start: %+v", got)
	}
	if n, m := len(s.ExecutionsBy("w1")), len(s.ExecutionsBy("w2")); n != 3 || m != 0 {
		t.Fatalf("ExecutionsBy: w1 %d, w2 %d", n, m)
	}
}

func TestContractViolationsAreRecordedNotExecuted(t *testing.T) {
	s := start(t, Config{})
	ctx := context.Background()
	if got := post(t, ctx, s.URL(), req("tx-1", "pod-1", "w1", 1), "other"); got != 400 {
		t.Fatalf("mismatched key: %d", got)
	}
	if got := post(t, ctx, s.URL(), req("tx-1", "", "w1", 1), ""); got != 400 {
		t.Fatalf("no instance: %d", got)
	}
	resp, err := http.Post(s.URL(), "application/json", strings.NewReader("{not json"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// The contract before floors: per-attempt fields in the body, the bare transaction id as key.
	old, _ := http.NewRequest(http.MethodPost, s.URL(), strings.NewReader(`{"transaction_id":"tx-1","impl_type":"Pay","instance_id":"p","attempt":2}`))
	old.Header.Set(IdempotencyHeader, "tx-1")
	if resp, err := http.DefaultClient.Do(old); err != nil || resp.StatusCode != 400 {
		t.Fatalf("old-contract request: %v, %v; want 400", resp, err)
	}
	noAttempt := req("tx-2", "pod-1", "w1", 1)
	noAttempt.Attempt = -1 // Retry-Attempt: 0
	if got := post(t, ctx, s.URL(), noAttempt, ""); got != 400 {
		t.Fatalf("Retry-Attempt 0: %d, want 400", got)
	}
	// The same key with another body: refused, as the IETF draft has it.
	if got := post(t, ctx, s.URL(), req("tx-3", "pod-1", "w1", 1), ""); got != 200 {
		t.Fatalf("first call of tx-3: %d", got)
	}
	if got := post(t, ctx, s.URL(), req("tx-3", "pod-2", "w1", 1), ""); got != 422 {
		t.Fatalf("tx-3 again with another body: %d, want 422", got)
	}
	if n := len(s.Violations()); n != 6 {
		t.Fatalf("%d violations, want 6: %v", n, s.Violations())
	}
	if n := len(s.Executions()); n != 1 {
		t.Fatalf("%d executions recorded, want tx-3's good call alone", n)
	}
}

func TestUnavailableForAWhileAndBySwitch(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := start(t, Config{UnavailableFor: 10 * time.Second, Now: clk.Now})
	ctx := context.Background()
	if got := post(t, ctx, s.URL(), req("a", "p", "w", 1), ""); got != 503 {
		t.Fatalf("inside UnavailableFor: %d", got)
	}
	clk.Advance(10 * time.Second)
	if got := post(t, ctx, s.URL(), req("a", "p", "w", 1), ""); got != 200 {
		t.Fatalf("after UnavailableFor: %d", got)
	}
	s.SetUnavailable(true)
	if got := post(t, ctx, s.URL(), req("b", "p", "w", 1), ""); got != 503 {
		t.Fatalf("switch on: %d", got)
	}
	s.SetUnavailable(false)
	if got := post(t, ctx, s.URL(), req("b", "p", "w", 1), ""); got != 200 {
		t.Fatalf("switch off: %d", got)
	}
	if d := s.Duplicates(); len(d) != 0 {
		t.Fatalf("a 503 then a 200 is not executed twice: %v", d)
	}
}

func TestPermanentFractionIsDeterministic(t *testing.T) {
	s := start(t, Config{PermanentFraction: 0.1})
	n := 0
	for i := range 10000 {
		if s.IsPermanent(fmt.Sprintf("tx-%d", i)) {
			n++
		}
	}
	if n < 800 || n > 1200 {
		t.Fatalf("%d of 10000 ids permanent with fraction 0.1", n)
	}
	s2 := start(t, Config{PermanentFraction: 0.1})
	for i := range 1000 {
		id := fmt.Sprintf("tx-%d", i)
		if s.IsPermanent(id) != s2.IsPermanent(id) {
			t.Fatalf("%s chosen differently by two servers", id)
		}
	}
}

func TestAbortedWhenTheClientGoesAway(t *testing.T) {
	s := start(t, Config{Latency: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() { done <- post(t, ctx, s.URL(), req("a", "p", "w", 1), "") }()
	if err := s.WaitExecutions(context.Background(), func(es []Execution) bool { return len(es) == 1 }); err != nil {
		t.Fatal(err)
	}
	if e := s.Executions()[0]; !e.Running() || e.Aborted() || e.Done() {
		t.Fatalf("under way: %+v", e)
	}
	cancel()
	<-done
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if err := s.WaitExecutions(wctx, func(es []Execution) bool { return !es[0].Running() }); err != nil {
		t.Fatal(err)
	}
	if e := s.Executions()[0]; !e.Aborted() || e.Done() {
		t.Fatalf("after the client left: %+v", e)
	}
	if s.DoneCount("a") != 0 {
		t.Fatal("an aborted execution counted as done")
	}
}

func TestConcurrentExecutionsOfOneTransactionAreDoneOnceThenConflict(t *testing.T) {
	s := start(t, Config{Latency: 5 * time.Millisecond})
	var wg sync.WaitGroup
	codes := make(chan int, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- post(t, context.Background(), s.URL(), req("same", "p", "w", 1), "")
		}()
	}
	wg.Wait()
	close(codes)
	ok := 0
	for c := range codes {
		switch c {
		case 200:
			ok++
		case 409:
		default:
			t.Errorf("status %d", c)
		}
	}
	if ok != 1 || s.DoneCount("same") != 20 {
		t.Fatalf("%d answered 200 (want 1), done count %d (want 20)", ok, s.DoneCount("same"))
	}
}

func TestSummaryEndpoint(t *testing.T) {
	s := start(t, Config{})
	post(t, context.Background(), s.URL(), req("a", "p", "w", 1), "")
	resp, err := http.Get("http://" + s.Addr() + "/v1/summary")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sum Summary
	if err := json.NewDecoder(resp.Body).Decode(&sum); err != nil {
		t.Fatal(err)
	}
	if sum.Executions != 1 || sum.Done != 1 || sum.ByWorker["w"] != 1 {
		t.Fatalf("summary %+v", sum)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, c := range []Config{
		{Latency: -1}, {PermanentFraction: 1.5}, {PermanentStatus: 409}, {PermanentStatus: 503},
		{Addr: "0.0.0.0:0"}, {Addr: "nonsense"},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestRefusalsCountWhenTheCallsCame: a switch on before any call refuses nothing; the count and
// the first refusal's arrival start with the first call answered 503.
func TestRefusalsCountWhenTheCallsCame(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := start(t, Config{Now: clk.Now})
	s.SetUnavailable(true)
	clk.Advance(time.Minute)
	if n, first := s.Refusals(); n != 0 || !first.IsZero() {
		t.Fatalf("no call yet: %d refused, first at %v", n, first)
	}
	at := clk.Now()
	for _, tx := range []string{"a", "b"} {
		if got := post(t, context.Background(), s.URL(), req(tx, "p", "w", 1), ""); got != 503 {
			t.Fatalf("%s: %d, want 503", tx, got)
		}
		clk.Advance(time.Second)
	}
	s.SetUnavailable(false)
	post(t, context.Background(), s.URL(), req("c", "p", "w", 1), "")
	if n, first := s.Refusals(); n != 2 || !first.Equal(at) {
		t.Fatalf("%d refused, first at %v; want 2, first at %v", n, first, at)
	}
}

// TestHoldNextKeepsOneCallUnderWay: the next call is held, under way, until released; the calls
// after it are not; a released hold no call took holds nothing.
func TestHoldNextKeepsOneCallUnderWay(t *testing.T) {
	s := start(t, Config{})
	held, release := s.HoldNext()
	answered := make(chan int, 1)
	go func() { answered <- post(t, context.Background(), s.URL(), req("a", "p", "w1", 1), "") }()
	e := <-held
	if e.TransactionID != "a" || e.WorkerID != "w1" || !s.Executions()[0].Running() {
		t.Fatalf("held %+v, record %+v; want a from w1 under way", e, s.Executions())
	}
	if got := post(t, context.Background(), s.URL(), req("b", "p", "w2", 1), ""); got != 200 {
		t.Fatalf("a call after the held one: %d", got)
	}
	release()
	if got := <-answered; got != 200 {
		t.Fatalf("the held call after its release: %d", got)
	}
	_, release = s.HoldNext()
	release()
	if got := post(t, context.Background(), s.URL(), req("c", "p", "w1", 1), ""); got != 200 {
		t.Fatalf("after a withdrawn hold: %d", got)
	}
}
