package leaseclient

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rsocket/rsocket-go"

	"github.com/retryring/retryring/lease"
)

func validConfig() Config {
	return Config{WorkerID: "w", Ring: testRing, Coordinators: []string{"127.0.0.1:7000"}}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		ok     bool
	}{
		{"defaults", func(*Config) {}, true},
		{"no worker id", func(c *Config) { c.WorkerID = "" }, false},
		{"long worker id", func(c *Config) { c.WorkerID = strings.Repeat("w", 257) }, false},
		{"long incarnation", func(c *Config) { c.Incarnation = strings.Repeat("i", 257) }, false},
		{"no ring service", func(c *Config) { c.Ring.Service = "" }, false},
		{"no coordinators", func(c *Config) { c.Coordinators = nil }, false},
		{"address without port", func(c *Config) { c.Coordinators = []string{"localhost"} }, false},
		{"keepalive too slow", func(c *Config) { c.Keepalive = MaxKeepalive + time.Millisecond }, false},
		{"keepalive of older clients", func(c *Config) { c.Keepalive = 200 * time.Millisecond }, true},
		{"keepalive at the limit", func(c *Config) { c.Keepalive = MaxKeepalive }, true},
		{"negative keepalive", func(c *Config) { c.Keepalive = -time.Millisecond }, false},
		{"lifetime too short", func(c *Config) { c.KeepaliveLifetime = 300 * time.Millisecond }, false},
		{"lifetime for an answer to every KEEPALIVE", func(c *Config) { c.KeepaliveLifetime, c.KeepaliveAnswerEvery = 600*time.Millisecond, 1 }, true},
		{"negative answer every", func(c *Config) { c.KeepaliveAnswerEvery = -1 }, false},
		{"backoff upside down", func(c *Config) { c.Backoff = Backoff{Min: time.Second, Max: time.Millisecond} }, false},
		{"negative margin", func(c *Config) { c.GuardMargin = -1 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := validConfig()
			tc.mutate(&cfg)
			err := cfg.Validate()
			if tc.ok != (err == nil) {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("%v does not wrap ErrInvalidConfig", err)
			}
		})
	}
}

func TestNewFillsDefaultsAndIncarnation(t *testing.T) {
	a, err := New(validConfig())
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(validConfig())
	if err != nil {
		t.Fatal(err)
	}
	if a.Incarnation() == "" || a.Incarnation() == b.Incarnation() {
		t.Errorf("incarnations %q and %q: want random and distinct", a.Incarnation(), b.Incarnation())
	}
	cfg := validConfig()
	cfg.Incarnation = "given"
	c, err := New(cfg)
	if err != nil || c.Incarnation() != "given" {
		t.Errorf("kept incarnation %q, %v", c.Incarnation(), err)
	}
	if c.cfg.Keepalive != DefaultKeepalive || c.cfg.KeepaliveLifetime != DefaultKeepaliveLifetime ||
		c.cfg.Backoff != (Backoff{DefaultBackoffMin, DefaultBackoffMax, DefaultBackoffHolding}) || c.cfg.Clock == nil {
		t.Errorf("defaults not filled: %+v", c.cfg)
	}
	if _, err := New(Config{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("New(Config{}) = %v", err)
	}
}

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	ceilings := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000}
	for attempt, ceiling := range ceilings {
		ceiling *= time.Millisecond
		if d := b.delay(attempt, 0); d != 0 {
			t.Errorf("attempt %d, r=0: %v, want 0 (full jitter)", attempt, d)
		}
		if d := b.delay(attempt, 0.5); d != ceiling/2 {
			t.Errorf("attempt %d, r=0.5: %v, want %v", attempt, d, ceiling/2)
		}
		if d := b.delay(attempt, 0.999999); d >= ceiling || d < ceiling*99/100 {
			t.Errorf("attempt %d, r→1: %v, want just under %v", attempt, d, ceiling)
		}
	}
	for _, attempt := range []int{40, 63, 64, 1000} {
		if d := b.delay(attempt, 0.5); d != b.Max/2 {
			t.Errorf("attempt %d: %v, want %v (no overflow)", attempt, d, b.Max/2)
		}
	}
}

func TestDrops(t *testing.T) {
	whole, halves := lease.Split(1), lease.Split(2)
	node := func(i int, rs lease.Ranges) lease.Lease { return lease.Lease{NodeIndex: i, Ranges: rs} }
	for _, tc := range []struct {
		name       string
		prev, next lease.Lease
		want       bool
	}{
		{"same", node(1, halves[1:]), node(1, halves[1:]), false},
		{"shrink", node(1, whole), node(1, halves[1:]), true},
		{"grow", node(1, halves[1:]), node(1, whole), false},
		{"lose Node-0 only", node(0, whole), node(1, whole), true},
		{"gain Node-0", node(1, whole), node(0, whole), false},
		{"move", node(1, halves[:1]), node(1, halves[1:]), true},
	} {
		if got := drops(tc.prev, tc.next); got != tc.want {
			t.Errorf("%s: drops = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// frameError stands for an error frame as rsocket-go reports it.
type frameError struct {
	code rsocket.ErrorCode
	data string
}

func (e frameError) Error() string                { return fmt.Sprintf("%s: %s", e.code, e.data) }
func (e frameError) ErrorCode() rsocket.ErrorCode { return e.code }
func (e frameError) ErrorData() []byte            { return []byte(e.data) }

func TestRemoteError(t *testing.T) {
	notLeader := frameError{rsocket.ErrorCodeApplicationError,
		`{"error":"not_leader","leader_id":"c2","leader_rsocket_addr":"10.0.0.2:7000"}`}
	err := remoteError(fmt.Errorf("stream: %w", notLeader))
	if !errors.Is(err, lease.ErrNotLeader) {
		t.Errorf("%v is not ErrNotLeader", err)
	}
	if id, addr, ok := redirectTarget(err); !ok || id != "c2" || addr != "10.0.0.2:7000" {
		t.Errorf("redirectTarget = %q %q %v", id, addr, ok)
	}

	for _, tc := range []struct {
		in       error
		sentinel error
		redirect bool
	}{
		{frameError{rsocket.ErrorCodeApplicationError, `{"error":"not_leader"}`}, lease.ErrNotLeader, false},
		{frameError{rsocket.ErrorCodeApplicationError, `{"error":"no_leader"}`}, lease.ErrNoLeader, false},
		{frameError{rsocket.ErrorCodeRejectedSetup, `{"error":"bad_setup","message":"no ring"}`}, lease.ErrBadSetup, false},
		{frameError{rsocket.ErrorCodeRejectedSetup, `{"error":"unauthorized"}`}, lease.ErrUnauthorized, false},
		{frameError{rsocket.ErrorCodeApplicationError, `{"error":"duplicate_connection"}`}, lease.ErrDuplicate, false},
		{frameError{rsocket.ErrorCodeApplicationError, `plain text`}, lease.ErrInternal, false},
		{frameError{rsocket.ErrorCodeConnectionClose, `bye`}, ErrDisconnected, false},
		{errors.New("socket closed"), ErrDisconnected, false},
	} {
		err := remoteError(tc.in)
		if !errors.Is(err, tc.sentinel) {
			t.Errorf("remoteError(%v) = %v, want %v", tc.in, err, tc.sentinel)
		}
		if _, _, ok := redirectTarget(err); ok != tc.redirect {
			t.Errorf("redirectTarget(%v) = %v", err, ok)
		}
	}
	if remoteError(nil) != nil {
		t.Error("remoteError(nil) != nil")
	}
}

// TestRoutingMetadataBytes pins the bytes that docs/protocol.md shows to non-Go implementers.
func TestRoutingMetadataBytes(t *testing.T) {
	for route, want := range map[string]string{
		lease.RouteLeases:  "fe00000c0b72696e672e6c6561736573",
		lease.RouteRelease: "fe00000d0c72696e672e72656c65617365",
		lease.RouteLeave:   "fe00000b0a72696e672e6c65617665",
		lease.RouteView:    "fe00000a0972696e672e76696577",
	} {
		md, err := routingMetadata(route)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(md); got != want {
			t.Errorf("%s: metadata %s, want %s", route, got, want)
		}
	}
}
