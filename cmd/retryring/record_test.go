package main

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// A write the recorder's own window deadline cut off is tried again; a run that was stopped, or
// any other error, is not (a second try would only repeat it or outlive the run).
func TestRecordTriesAgainOnlyAWriteItsWindowCutOff(t *testing.T) {
	live := context.Background()
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	cut := fmt.Errorf("recorder: tier 5 row tx-1 in 2026-12-07/1238+1m: %w", context.DeadlineExceeded)
	for _, tc := range []struct {
		name string
		run  context.Context
		err  error
		want bool
	}{
		{"cut off by the window's start", live, cut, true},
		{"recorded", live, nil, false},
		{"the run was stopped", stopped, cut, false},
		{"canceled", live, fmt.Errorf("recorder: %w", context.Canceled), false},
		{"another error", live, errors.New("Cannot achieve consistency level LOCAL_QUORUM"), false},
	} {
		if got := windowCutOff(tc.run, tc.err); got != tc.want {
			t.Errorf("%s: windowCutOff = %v, want %v", tc.name, got, tc.want)
		}
	}
}
