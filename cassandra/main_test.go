package cassandra_test

import (
	"testing"

	"github.com/retryring/retryring/testkit/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }
