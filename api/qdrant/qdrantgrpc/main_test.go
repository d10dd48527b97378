package qdrantgrpc_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves goroutines behind: every test stops
// its gRPC server and closes its client, router and cluster.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
