package cassandra_test

import (
	"context"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/testkit/cassandratest"
	"github.com/retryring/retryring/window"
)

func addr() string { return cassandratest.Addr() }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func cassandraBucket(w window.Window) cassandra.BucketKey {
	return cassandra.BucketKey{Window: w, InstanceID: "pod", Bucket: 0}
}
