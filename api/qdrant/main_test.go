package qdrant_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves goroutines behind: every test closes
// its HTTP server, its router and its dev cluster (apitest.New's
// cleanups).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
