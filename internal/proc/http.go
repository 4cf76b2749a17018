package proc

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// httpTimeout bounds one admin request: a SIGSTOPped process accepts connections (the kernel
// does) but never answers.
const httpTimeout = 2 * time.Second

var httpClient = &http.Client{Timeout: httpTimeout}

// httpsClient is the client of https URLs: the coordinators of a cluster started with
// Options.AdminTLS. One per process, the last one set (a process runs TLS clusters of one PKI).
var httpsClient atomic.Pointer[http.Client]

func setAdminTLS(cfg *tls.Config) {
	httpsClient.Store(&http.Client{Timeout: httpTimeout, Transport: &http.Transport{TLSClientConfig: cfg}})
}

func clientFor(url string) *http.Client {
	if c := httpsClient.Load(); c != nil && strings.HasPrefix(url, "https://") {
		return c
	}
	return httpClient
}

// pollEvery is the period of every readiness and state poll.
const pollEvery = 100 * time.Millisecond

// get fetches url and returns its status and body.
func get(ctx context.Context, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := clientFor(url).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, body, err
}

// getJSON fetches url, demands 200, and decodes its body into v.
func getJSON(ctx context.Context, url string, v any) error {
	status, body, err := get(ctx, url)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", url, status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}

// WaitOK polls url until it answers 200. It fails at once when p exits (with ErrPortInUse when
// its log says a port was taken), and when ctx ends.
func WaitOK(ctx context.Context, p *Process, url string) error {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	var last string
	for {
		status, body, err := get(ctx, url)
		switch {
		case err == nil && status == http.StatusOK:
			return nil
		case err != nil:
			last = err.Error()
		default:
			last = fmt.Sprintf("%d %s", status, body)
		}
		select {
		case <-p.Exited():
			if p.LogContains("address already in use") {
				return fmt.Errorf("%w: %s: %s", ErrPortInUse, p.Name(), p.Tail(3))
			}
			return fmt.Errorf("%w: %s exited (%s) before %s answered 200; log %s:\n%s",
				ErrNotRunning, p.Name(), exitText(p.ExitErr()), url, p.LogPath(), p.Tail(10))
		case <-ctx.Done():
			return fmt.Errorf("proc: %s: %s did not answer 200 (last: %s): %w", p.Name(), url, last, ctx.Err())
		case <-t.C:
		}
	}
}
