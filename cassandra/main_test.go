package cassandra_test

import (
	"testing"

	"github.com/retryring/retryring/cassandra/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }
