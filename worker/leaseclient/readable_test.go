package leaseclient

import (
	"errors"
	"fmt"
	"io"
	"testing"
)

// TestALostConnectionReadsOnce: the worker's line about a lost connection says rsocket-go's
// wrappers once ("read frame failed: EOF", not "read frame failed:: EOF"), and the cause stays
// reachable by errors.Is.
func TestALostConnectionReadsOnce(t *testing.T) {
	lost := fmt.Errorf("read frame failed:: %w", io.EOF) // as rsocket-go's TCP connection wraps it
	err := remoteError(lost)
	if want := "leaseclient: connection lost: read frame failed: EOF"; err.Error() != want {
		t.Errorf("remoteError = %q, want %q", err, want)
	}
	if !errors.Is(err, ErrDisconnected) || !errors.Is(err, io.EOF) {
		t.Errorf("%v: the sentinel or the cause is lost", err)
	}
}
