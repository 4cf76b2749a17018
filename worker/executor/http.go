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
	"syscall"
	"time"

	"github.com/retryring/retryring/worker"
	"github.com/retryring/retryring/worker/retrypolicy"
)

// ErrInvalidConfig means an HTTPConfig failed validation.
var ErrInvalidConfig = errors.New("executor: invalid configuration")

// IdempotencyHeader carries the transaction id, so that a downstream service can recognise a step
// executed twice (a worker may crash between the call and its COMMITTED marker).
const IdempotencyHeader = "Idempotency-Key"

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

// Request is the JSON body of each POST (product.md, "Executor").
type Request struct {
	TransactionID string `json:"transaction_id"`
	ServiceName   string `json:"service_name"`
	Region        string `json:"region"`
	Cluster       string `json:"cluster"`
	InstanceID    string `json:"instance_id"`
	AllocationKey string `json:"allocation_key"`
	ImplType      string `json:"impl_type"`
	Attempt       int    `json:"attempt"`
	WindowDate    string `json:"window_date"`   // YYYY-MM-DD (UTC)
	WindowMinute  int    `json:"window_minute"` // minute_of_day of the window's first minute
	WorkerID      string `json:"worker_id"`
	LeaseEpoch    uint64 `json:"lease_epoch"`
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
		Attempt:       t.Attempt,
		WindowDate:    t.Window.Day.String(),
		WindowMinute:  t.Window.Minute,
		WorkerID:      t.WorkerID,
		LeaseEpoch:    t.LeaseEpoch,
	}
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
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(IdempotencyHeader, t.TransactionID)

	resp, err := h.client.Do(req)
	if err != nil {
		if fenced() && !errors.Is(err, ErrFenced) {
			err = fmt.Errorf("%w (%w)", ErrFenced, err)
		}
		return worker.Outcome{Kind: worker.Transient, Err: transportError(ctx, err)}
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	// Drain a little more so that the connection can be reused; give up on huge bodies.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))

	out := worker.Outcome{Kind: kindOf(h.policies.For(t.ImplType).Classify(resp.StatusCode)), Status: resp.StatusCode}
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

// kindOf is the worker's name for a policy class.
func kindOf(c retrypolicy.Class) worker.OutcomeKind {
	switch c {
	case retrypolicy.Done:
		return worker.Done
	case retrypolicy.Permanent:
		return worker.Permanent
	default:
		return worker.Transient
	}
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
