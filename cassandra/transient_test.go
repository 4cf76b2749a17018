package cassandra_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/cassandra"
)

func TestTransientTellsBusyFromBroken(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("cassandra: mark dead letter a/P replayed: %w", &gocql.RequestErrWriteTimeout{WriteType: "CAS"}), true},
		{&gocql.RequestErrReadTimeout{}, true},
		{&gocql.RequestErrUnavailable{}, true},
		{fmt.Errorf("x: %w", gocql.ErrTimeoutNoResponse), true},
		{gocql.ErrNoConnections, true},
		{gocql.ErrConnectionClosed, true},
		{errors.New("line 1:0 no viable alternative"), false},
		{context.DeadlineExceeded, false},
		{gocql.ErrNotFound, false},
		{nil, false},
	} {
		if got := cassandra.Transient(c.err); got != c.want {
			t.Errorf("Transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
