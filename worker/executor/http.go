package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"syscall"
	"time"

	"github.com/retryring/retryring/worker"
	"github.com/retryring/retryring/worker/retrypolicy"
)

// ErrInvalidConfig means an HTTPConfig failed validation.
var ErrInvalidConfig = errors.New("executor: invalid configuration")

// The headers of every request. The body is the same for every attempt of a step, as the IETF
// Idempotency-Key draft expects of a client that reuses a key; what changes per attempt travels
// here.
const (
	// IdempotencyHeader names the step: <transaction_id>:<impl_type>, plus :r<replay> after a
	// replay of its dead letter (IdempotencyKey). One key per step, so that two steps of one
	// transaction are never taken for one request.
	IdempotencyHeader = "Idempotency-Key"
	// AttemptHeader is the retry number of this call: 1 for the first retry of a step (the row's
	// attempt + 1).
	AttemptHeader = "Retry-Attempt"
	// WorkerHeader is the worker that sends it; LeaseEpochHeader the epoch of the lease it runs
	// under, for a downstream that fences on it; WindowHeader the window the row was found in,
	// <date>/<minute_of_day> (UTC).
	WorkerHeader     = "Retryring-Worker"
	LeaseEpochHeader = "Retryring-Lease-Epoch"
	WindowHeader     = "Retryring-Window"
)

// IdempotencyKey is the key of a step: one per (transaction, step, replay generation).
func IdempotencyKey(transactionID, implType string, replay int) string {
	key := transactionID + ":" + implType
	if replay > 0 {
		key += ":r" + strconv.Itoa(replay)
	}
	return key
}

// maxErrorBody is how much of a failed response's body is kept in the outcome's error (and so in
// the dead letter).
const maxErrorBody = 512

// HTTPConfig configures an HTTP executor.
type HTTPConfig struct {
	// URL receives a POST per task. Required: http or https.
	URL string
	// Client sends the requests. Default: a client with its own transport and no overall timeout
	// (the worker bounds every execution through its context), whose connections refuse to write
	// a request past its context's deadline (see ErrFenced). A Client given here sends without
	// that fence.
	Client *http.Client
	// Policies classifies each answer by its step's policy (Task.ImplType). The zero Set is the
	// built-in classification for every step.
	Policies retrypolicy.Set

	// now is the fence's clock, and the one a Retry-After date is read against; tests stall it.
	now func() time.Time
}

// HTTP is the Executor of the binary: one JSON POST per task.
type HTTP struct {
	url      string
	client   *http.Client
	policies retrypolicy.Set
	now      func() time.Time
}

// NewHTTP checks cfg and returns an executor.
func NewHTTP(cfg HTTPConfig) (*HTTP, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: executor url %q must be an absolute http(s) URL", ErrInvalidConfig, cfg.URL)
	}
	now := cfg.now
	if now == nil {
		now = time.Now
	}
	c := cfg.Client
	if c == nil {
		c = &http.Client{Transport: fencedTransport(now)}
	}
	return &HTTP{url: u.String(), client: c, policies: cfg.Policies, now: now}, nil
}

// Request is the JSON body of each POST (product.md, "Executor"): the step, the same for every
// attempt of it.
type Request struct {
	TransactionID string `json:"transaction_id"`
	ServiceName   string `json:"service_name"`
	Region        string `json:"region"`
	Cluster       string `json:"cluster"`
	InstanceID    string `json:"instance_id"`
	AllocationKey string `json:"allocation_key"`
	ImplType      string `json:"impl_type"`
	Replay        int    `json:"replay"` // the replay generation, also in the idempotency key
}

// RequestOf is the body sent for t.
func RequestOf(t worker.Task) Request {
	return Request{
		TransactionID: t.TransactionID,
		ServiceName:   t.ServiceName,
		Region:        t.Region,
		Cluster:       t.Cluster,
		InstanceID:    t.InstanceID,
		AllocationKey: t.AllocationKey,
		ImplType:      t.ImplType,
		Replay:        t.Replay,
	}
}

// setHeaders sets the per-attempt headers of t's request.
func setHeaders(h http.Header, t worker.Task) {
	h.Set("Content-Type", "application/json")
	h.Set(IdempotencyHeader, IdempotencyKey(t.TransactionID, t.ImplType, t.Replay))
	h.Set(AttemptHeader, strconv.Itoa(t.Attempt+1))
	h.Set(WorkerHeader, t.WorkerID)
	h.Set(LeaseEpochHeader, strconv.FormatUint(t.LeaseEpoch, 10))
	h.Set(WindowHeader, t.Window.Day.String()+"/"+strconv.Itoa(t.Window.Minute))
}

// Execute POSTs t and classifies the answer by t's step's policy. It returns when ctx ends at
// the latest.
func (h *HTTP) Execute(ctx context.Context, t worker.Task) worker.Outcome {
	body, err := json.Marshal(RequestOf(t))
	if err != nil {
		return worker.Outcome{Kind: worker.Permanent, Err: fmt.Errorf("executor: encode task: %w", err)}
	}
	fctx, fenced := withFence(ctx)
	req, err := http.NewRequestWithContext(fctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return worker.Outcome{Kind: worker.Permanent, Err: fmt.Errorf("executor: build request: %w", err)}
	}
	setHeaders(req.Header, t)

	resp, err := h.client.Do(req)
	if err != nil {
		if fenced() {
			// Refused before a byte was written: the downstream never saw it, so it is no
			// outcome and uses no attempt (the row stays for a later pass).
			if !errors.Is(err, ErrFenced) {
				err = fmt.Errorf("%w (%w)", ErrFenced, err)
			}
			return worker.Outcome{Kind: worker.NotSent, Err: err}
		}
		return worker.Outcome{Kind: worker.Transient, Err: transportError(ctx, err)}
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	// Drain a little more so that the connection can be reused; give up on huge bodies.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))

	out := worker.Outcome{Kind: h.policies.For(t.ImplType).Classify(resp.StatusCode), Status: resp.StatusCode}
	if out.Kind == worker.Done {
		return out
	}
	out.Err = fmt.Errorf("executor: %s: %s", resp.Status, bytes.TrimSpace(snippet))
	if out.Kind == worker.Transient && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		// A value that is no Retry-After is ignored: the backoff alone still keeps the row.
		if d, ok := retrypolicy.RetryAfter(resp.Header.Get("Retry-After"), h.now()); ok {
			out.RetryAfter = d
		}
	}
	return out
}

// transportError names the usual transient causes so that dead letters read well.
func transportError(ctx context.Context, err error) error {
	var ne net.Error
	switch {
	case errors.Is(err, ErrFenced):
		return err
	case ctx.Err() != nil:
		return fmt.Errorf("executor: timeout: %w", err)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("executor: connection refused: %w", err)
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("executor: timeout: %w", err)
	default:
		return fmt.Errorf("executor: %w", err)
	}
}
