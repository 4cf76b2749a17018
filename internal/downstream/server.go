package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryring/retryring/wallclock"
)

// ErrInvalidConfig means a Config failed validation.
var ErrInvalidConfig = errors.New("downstream: invalid configuration")

// The headers of the executor contract (product.md, "Executor"), read here independently of the
// worker's executor package so that the stub can catch it breaking the contract.
const (
	IdempotencyHeader = "Idempotency-Key"       // <transaction_id>:<impl_type>[:r<replay>]
	AttemptHeader     = "Retry-Attempt"         // 1 for a step's first retry
	WorkerHeader      = "Retryring-Worker"      // the worker sending the call
	LeaseEpochHeader  = "Retryring-Lease-Epoch" // the epoch of its lease
	WindowHeader      = "Retryring-Window"      // <date>/<minute_of_day> of the row's window
)

// ExecutePath is the path the executor URL points at; GET /v1/summary answers Summary as JSON.
const ExecutePath = "/execute"

// DefaultPermanentStatus is the answer to a transaction chosen to fail permanently: a 4xx that
// the worker must dead-letter at once.
const DefaultPermanentStatus = http.StatusUnprocessableEntity

// Config sets the stub's behaviour. The zero value answers 200 at once to everything.
type Config struct {
	// UnavailableFor: every request is answered 503 until this long after Start.
	UnavailableFor time.Duration
	// Latency is how long the stub works on a request before answering; Jitter adds a uniformly
	// random extra in [0, Jitter). A request whose connection closes meanwhile is aborted.
	Latency time.Duration
	Jitter  time.Duration
	// PermanentFraction of transaction ids, chosen by a hash of the id (the same ids on every
	// call and every run), are answered PermanentStatus. PermanentIDs are answered so as well.
	PermanentFraction float64
	PermanentIDs      []string
	// PermanentStatus is the permanent answer: a 4xx other than 408, 409, 425 and 429.
	// Default DefaultPermanentStatus.
	PermanentStatus int
	// Addr is the listen address. Default 127.0.0.1:0 (a free loopback port).
	Addr string
	// Now tells the time (with its monotonic reading) for every recorded instant and for
	// UnavailableFor. Default time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.PermanentStatus == 0 {
		c.PermanentStatus = DefaultPermanentStatus
	}
	if c.Addr == "" {
		c.Addr = "127.0.0.1:0"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports the first problem of c.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch s := c.PermanentStatus; {
	case c.UnavailableFor < 0 || c.Latency < 0 || c.Jitter < 0:
		return fmt.Errorf("%w: negative duration", ErrInvalidConfig)
	case c.PermanentFraction < 0 || c.PermanentFraction > 1:
		return fmt.Errorf("%w: permanent fraction %v outside [0, 1]", ErrInvalidConfig, c.PermanentFraction)
	case s < 400 || s > 499 || s == 408 || s == 409 || s == 425 || s == 429:
		return fmt.Errorf("%w: permanent status %d is not a permanent 4xx", ErrInvalidConfig, s)
	}
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return fmt.Errorf("%w: addr %q: %w", ErrInvalidConfig, c.Addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%w: addr %q is not a loopback address", ErrInvalidConfig, c.Addr)
	}
	return nil
}

// Request is the JSON body the stub expects (product.md, "Executor"): the step, the same for
// every attempt of it. The stub decodes it strictly: a field it does not know (a per-attempt
// field in the body, as the contract had it before) is a violation. It is written apart from
// worker/executor.Request on purpose: the stub is a second reading of the contract, so a field the
// executor starts sending without the contract changing shows up as a violation in the demo and the
// end-to-end suite instead of being accepted by the very type that sends it.
type Request struct {
	TransactionID string `json:"transaction_id"`
	ServiceName   string `json:"service_name"`
	Region        string `json:"region"`
	Cluster       string `json:"cluster"`
	InstanceID    string `json:"instance_id"`
	AllocationKey string `json:"allocation_key"`
	ImplType      string `json:"impl_type"`
	Replay        int    `json:"replay"`
}

// Key is the idempotency key the contract gives the step of r.
func (r Request) Key() string {
	k := r.TransactionID + ":" + r.ImplType
	if r.Replay > 0 {
		k += ":r" + strconv.Itoa(r.Replay)
	}
	return k
}

// Call is what the headers say about one call of a step.
type Call struct {
	// Attempt is the row's attempt: the Retry-Attempt header minus one (0 for a first retry).
	Attempt      int
	WorkerID     string
	LeaseEpoch   uint64
	WindowDate   string
	WindowMinute int
}

// parseCall reads the per-attempt headers; the error names the first one that is wrong.
func parseCall(h http.Header) (Call, error) {
	var c Call
	n, err := strconv.Atoi(h.Get(AttemptHeader))
	if err != nil || n < 1 {
		return c, fmt.Errorf("%s %q is not a retry number >= 1", AttemptHeader, h.Get(AttemptHeader))
	}
	c.Attempt = n - 1
	if c.WorkerID = h.Get(WorkerHeader); c.WorkerID == "" {
		return c, fmt.Errorf("empty %s", WorkerHeader)
	}
	if c.LeaseEpoch, err = strconv.ParseUint(h.Get(LeaseEpochHeader), 10, 64); err != nil {
		return c, fmt.Errorf("%s %q is not an epoch", LeaseEpochHeader, h.Get(LeaseEpochHeader))
	}
	date, minute, ok := strings.Cut(h.Get(WindowHeader), "/")
	if c.WindowMinute, err = strconv.Atoi(minute); !ok || err != nil || len(date) != len("2006-01-02") {
		return c, fmt.Errorf("%s %q is not <date>/<minute>", WindowHeader, h.Get(WindowHeader))
	}
	c.WindowDate = date
	return c, nil
}

// Execution is one request the stub received on ExecutePath.
type Execution struct {
	// Seq numbers executions in arrival order, from 1.
	Seq uint64
	Request
	Call
	// Start is when the request arrived, End when the answer left (or the client went away).
	// Both carry a monotonic reading: compare them only with instants of this process.
	Start, End time.Time
	// Status is the answer: 200, 409 (done before), 503 (unavailable), the permanent status, or 0
	// when the request was aborted (the client closed its connection before the answer).
	Status int
}

// Done reports whether the worker was told the step succeeded (2xx or 409).
func (e Execution) Done() bool {
	return (e.Status >= 200 && e.Status < 300) || e.Status == http.StatusConflict
}

// Aborted reports whether the client went away before the answer.
func (e Execution) Aborted() bool { return e.Status == 0 && !e.End.IsZero() }

// Running reports whether the stub is still working on it.
func (e Execution) Running() bool { return e.End.IsZero() }

// step is one step of one transaction: what a done answer is about.
type step struct{ transaction, impl string }

// Violation is a request that broke the executor contract.
type Violation struct {
	At     time.Time
	Reason string
	Body   string // at most 256 bytes of it
}

// Server is a running stub.
type Server struct {
	cfg       Config
	started   time.Time
	permanent map[string]bool
	srv       *http.Server
	ln        net.Listener
	served    chan struct{}

	unavailable atomic.Bool
	accepting   atomic.Bool  // the permanent refusals are over: the fixed downstream accepts them
	latency     atomic.Int64 // ns; overrides cfg.Latency after SetLatency
	jitter      atomic.Int64

	mu         sync.Mutex
	execs      []Execution
	done       map[step]int      // executions answered done, per step
	bodies     map[string]string // idempotency key → the first body sent with it
	violations []Violation
	// refused counts the calls answered 503, the first of which arrived at firstRefused.
	refused      int
	firstRefused time.Time
	// hold, when set, is the hold the next call to arrive takes (HoldNext).
	hold *hold
}

// hold keeps one call from being answered until it is released.
type hold struct {
	arrived  chan Execution // buffered: the call, as recorded when it arrived
	released chan struct{}
	once     sync.Once
}

// Start listens on cfg.Addr and serves until Close.
func Start(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("downstream: listen: %w", err)
	}
	s := &Server{
		cfg: cfg, started: cfg.Now(), permanent: map[string]bool{}, ln: ln, served: make(chan struct{}),
		done: map[step]int{}, bodies: map[string]string{},
	}
	for _, id := range cfg.PermanentIDs {
		s.permanent[id] = true
	}
	s.latency.Store(int64(cfg.Latency))
	s.jitter.Store(int64(cfg.Jitter))
	mux := http.NewServeMux()
	mux.HandleFunc(ExecutePath, s.handleExecute)
	mux.HandleFunc("/v1/summary", s.handleSummary)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(ln) // returns http.ErrServerClosed after Close
	}()
	return s, nil
}

// URL is the executor URL to give workers (--executor-url).
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() + ExecutePath }

// Addr is the listen address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops serving; requests under way are cut off. The record stays readable.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.served
	return err
}

// SetAcceptPermanent makes the stub accept, from now on, the transactions it refused for good
// (a fixed downstream, before their dead letters are replayed).
func (s *Server) SetAcceptPermanent(on bool) { s.accepting.Store(on) }

// SetUnavailable turns the 503 switch on or off (on: every request is answered 503, whatever
// UnavailableFor says).
func (s *Server) SetUnavailable(on bool) { s.unavailable.Store(on) }

// SetLatency changes the latency and jitter of requests that arrive from now on.
func (s *Server) SetLatency(latency, jitter time.Duration) {
	s.latency.Store(int64(latency))
	s.jitter.Store(int64(jitter))
}

// IsPermanent reports whether the stub answers id with the permanent status.
func (s *Server) IsPermanent(id string) bool {
	return s.permanent[id] || chosen(id, s.cfg.PermanentFraction)
}

// chosen picks a deterministic fraction of ids by their FNV-1a hash.
func chosen(id string, fraction float64) bool {
	if fraction <= 0 {
		return false
	}
	h := fnv.New64a()
	_, _ = io.WriteString(h, id)
	return float64(h.Sum64()%1_000_000) < fraction*1_000_000
}

func (s *Server) handleExecute(w http.ResponseWriter, r *http.Request) {
	start := s.cfg.Now()
	if r.Method != http.MethodPost {
		s.violate(start, "method "+r.Method, nil)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return // the client went away; nothing was executed
	}
	var req Request
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		s.violate(start, "body is not the executor JSON: "+err.Error(), body)
		http.Error(w, "bad JSON", http.StatusBadRequest)
		return
	}
	call, err := parseCall(r.Header)
	switch key := r.Header.Get(IdempotencyHeader); {
	case req.TransactionID == "" || req.ImplType == "":
		s.violate(start, "empty transaction_id or impl_type", body)
		http.Error(w, "empty transaction_id or impl_type", http.StatusBadRequest)
		return
	case key != req.Key():
		s.violate(start, fmt.Sprintf("%s %q is not %q", IdempotencyHeader, key, req.Key()), body)
		http.Error(w, "bad idempotency key", http.StatusBadRequest)
		return
	case req.InstanceID == "":
		s.violate(start, "empty instance_id", body)
		http.Error(w, "missing instance_id", http.StatusBadRequest)
		return
	case err != nil:
		s.violate(start, err.Error(), body)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	case !s.sameBody(key, body):
		// The IETF Idempotency-Key draft: a key reused with another payload is refused (422).
		s.violate(start, fmt.Sprintf("%s %q reused with another body", IdempotencyHeader, key), body)
		http.Error(w, "idempotency key reused with another body", http.StatusUnprocessableEntity)
		return
	}

	seq := s.begin(req, call, start)
	status := s.decide(req, start)
	if h := s.takeHold(seq); h != nil {
		select {
		case <-h.released:
		case <-r.Context().Done():
			s.finish(seq, 0)
			return
		}
	}
	if d := s.delay(); d > 0 {
		if !wallclock.Sleep(r.Context(), d) {
			s.finish(seq, 0)
			return
		}
	}
	// The effect (a done answer) is decided under the lock, so that two concurrent executions
	// of one transaction cannot both be answered 200.
	status = s.finish(seq, status)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `{"status":%d}`+"\n", status)
}

// decide picks the answer before the latency: unavailability and permanence do not change while
// a request is worked on.
func (s *Server) decide(req Request, now time.Time) int {
	switch {
	case s.unavailable.Load() || now.Before(s.started.Add(s.cfg.UnavailableFor)):
		return http.StatusServiceUnavailable
	case s.IsPermanent(req.TransactionID) && !s.accepting.Load():
		return s.cfg.PermanentStatus
	default:
		return http.StatusOK
	}
}

func (s *Server) delay() time.Duration {
	d := time.Duration(s.latency.Load())
	if j := s.jitter.Load(); j > 0 {
		d += time.Duration(rand.Int64N(j))
	}
	return d
}

func (s *Server) begin(req Request, call Call, start time.Time) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq := uint64(len(s.execs)) + 1
	s.execs = append(s.execs, Execution{Seq: seq, Request: req, Call: call, Start: start})
	return seq
}

// sameBody reports whether body is the first body seen under key (and remembers it if it is the
// first).
func (s *Server) sameBody(key string, body []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	first, ok := s.bodies[key]
	if !ok {
		s.bodies[key] = string(body)
		return true
	}
	return first == string(body)
}

// finish records the answer of execution seq and returns it: 200 becomes 409 for a transaction
// that was done before.
func (s *Server) finish(seq uint64, status int) int {
	end := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	e := &s.execs[seq-1]
	st := step{e.TransactionID, e.ImplType}
	if status == http.StatusOK && s.done[st] > 0 {
		status = http.StatusConflict
	}
	e.End, e.Status = end, status
	if e.Done() {
		s.done[st]++
	}
	if status == http.StatusServiceUnavailable {
		if s.refused++; s.firstRefused.IsZero() {
			s.firstRefused = e.Start
		}
	}
	return status
}

// Refusals counts the calls answered 503 so far, and says when the first of them arrived (zero
// before any): how long a down downstream has actually been refusing work, whenever the callers
// came.
func (s *Server) Refusals() (n int, first time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused, s.firstRefused
}

// HoldNext holds the next call that arrives (after its answer is decided, before its latency)
// until release is called or its client goes away, and sends it on held when it arrived: a demo
// or a test acts on a worker at the moment it has that execution under way. release also withdraws
// a hold no call took yet; calling it more than once is harmless. One hold at a time: a new one
// replaces one not taken yet.
func (s *Server) HoldNext() (held <-chan Execution, release func()) {
	h := &hold{arrived: make(chan Execution, 1), released: make(chan struct{})}
	s.mu.Lock()
	s.hold = h
	s.mu.Unlock()
	return h.arrived, func() {
		h.once.Do(func() { close(h.released) })
		s.mu.Lock()
		if s.hold == h {
			s.hold = nil
		}
		s.mu.Unlock()
	}
}

// takeHold hands the pending hold, if any, to execution seq.
func (s *Server) takeHold(seq uint64) *hold {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hold
	if h == nil {
		return nil
	}
	s.hold = nil
	h.arrived <- s.execs[seq-1]
	return h
}

func (s *Server) violate(at time.Time, reason string, body []byte) {
	if len(body) > 256 {
		body = body[:256]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.violations = append(s.violations, Violation{At: at, Reason: reason, Body: string(body)})
}

// Executions returns a copy of every execution so far, in arrival order. An execution still
// under way has a zero End.
func (s *Server) Executions() []Execution {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Execution(nil), s.execs...)
}

// ExecutionsSince returns the executions that arrived after t, in arrival order. It reads only
// the tail of the record, so polling it stays cheap on a long run.
func (s *Server) ExecutionsSince(t time.Time) []Execution {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := len(s.execs)
	for i > 0 && s.execs[i-1].Start.After(t) {
		i--
	}
	return append([]Execution(nil), s.execs[i:]...)
}

// ExecutionsOf returns the executions of one transaction, in arrival order.
func (s *Server) ExecutionsOf(transactionID string) []Execution {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Execution
	for _, e := range s.execs {
		if e.TransactionID == transactionID {
			out = append(out, e)
		}
	}
	return out
}

// ExecutionsBy returns the executions of one worker, in arrival order.
func (s *Server) ExecutionsBy(workerID string) []Execution {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Execution
	for _, e := range s.execs {
		if e.WorkerID == workerID {
			out = append(out, e)
		}
	}
	return out
}

// DoneCount is how many executions of transaction id (any step) were answered done.
func (s *Server) DoneCount(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for st, c := range s.done {
		if st.transaction == id {
			n += c
		}
	}
	return n
}

// DoneIDs returns every transaction id answered done at least once.
func (s *Server) DoneIDs() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]bool, len(s.done))
	for st := range s.done {
		out[st.transaction] = true
	}
	return out
}

// Violations returns the requests that broke the contract.
func (s *Server) Violations() []Violation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Violation(nil), s.violations...)
}

// Duplicates returns the transactions executed twice or more (answered done more than once).
func (s *Server) Duplicates() []Duplicate { return Duplicates(s.Executions()) }

// Interleavings returns the overlapping and stale executions of one instance by two workers.
func (s *Server) Interleavings() []Interleaving { return Interleavings(s.Executions()) }

// Summary counts the record so far.
func (s *Server) Summary() Summary {
	sum := Summarize(s.Executions())
	sum.Violations = len(s.Violations())
	return sum
}

// Reset forgets every execution and violation (a new phase of a demo). Tests never need it.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.execs, s.done, s.bodies, s.violations = nil, map[step]int{}, map[string]string{}, nil
}

func (s *Server) handleSummary(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s.Summary())
}

// WaitExecutions waits until pred holds for the record, checking every 50 ms, or ctx ends.
func (s *Server) WaitExecutions(ctx context.Context, pred func([]Execution) bool) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if pred(s.Executions()) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("downstream: waiting for executions: %w", ctx.Err())
		case <-t.C:
		}
	}
}
