package loader_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/api"
	"github.com/trawl-search/trawl/internal/loader"
)

// The loader cuts batches and ids by the router's own limits.
func TestLimitsAreTheRouters(t *testing.T) {
	require.Equal(t, api.MaxWriteBatch, loader.MaxBatch)
	require.Equal(t, api.MaxBodyBytes, loader.MaxBodyBytesForTest)
	require.Equal(t, api.MaxIDBytes, loader.MaxIDBytesForTest)
}
