package app_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/internal/testpki"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/vector"
)

// With inter-node TLS the default deadline is 250 ms, and a router that
// has just turned ready has already handshaken with every replica: its
// first query is never degraded (field report 002).
func TestFirstQueryAfterReadyOverTLSIsComplete(t *testing.T) {
	p := testpki.New(t)
	stc, err := shard.ServerTLS(p.ServerCert, p.ServerKey, p.CAFile)
	require.NoError(t, err)
	dc, err := devcluster.Start(devcluster.Config{Dim: 64, Docs: 600, Seed: 9, Kernel: vector.Generic(), TLS: stc})
	require.NoError(t, err)
	defer dc.Close()
	specs := dc.Specs()
	for restart := range 20 { // issue 4: twenty restarts, none degraded
		ctc, err := shard.ClientCredentials(p.CAFile, p.ClientCert, p.ClientKey)
		require.NoError(t, err)
		r, err := app.New(app.Config{Shards: specs, Kernel: vector.Generic(), Dial: client.DialConfig{Creds: ctc}, Budget: budget.Config{TLS: true}})
		require.NoError(t, err)
		h := &harness{dc: dc, r: r, srv: httptest.NewServer(r.API)}
		waitReady(t, r)
		a, resp, _ := h.search(t, "", map[string]any{"vector": dc.Corpus[restart].Vector, "k": 5})
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, 250, a.ScatterGather.DeadlineMS, "TLS configured: 250 ms default")
		require.False(t, a.ScatterGather.Degraded, "restart %d: %v", restart, a.ScatterGather.ShardErrors)
		h.srv.Close()
		r.Close()
	}
}

func TestShardsRefuseARouterWithoutClientCertificate(t *testing.T) {
	p := testpki.New(t)
	stc, err := shard.ServerTLS(p.ServerCert, p.ServerKey, p.CAFile)
	require.NoError(t, err)
	dc, err := devcluster.Start(devcluster.Config{Docs: 30, Seed: 9, Kernel: vector.Generic(), TLS: stc})
	require.NoError(t, err)
	defer dc.Close()
	ctc, err := shard.ClientCredentials(p.CAFile, "", "") // verifies the shards, presents nothing
	require.NoError(t, err)
	r, err := app.New(app.Config{Shards: dc.Specs()[:1],
		Dial: client.DialConfig{Creds: ctc}, Budget: budget.Config{TLS: true}, WarmupTimeout: 3 * time.Second, DisableProber: true})
	require.NoError(t, err)
	defer r.Close()
	h := &harness{dc: dc, r: r, srv: httptest.NewServer(r.API)}
	defer h.srv.Close()
	waitReady(t, r)
	// The router cannot read even the catalog: the search is refused
	// unavailable, not answered as if the collection did not exist.
	b, err := json.Marshal(map[string]any{"vector": dc.Corpus[0].Vector, "k": 5})
	require.NoError(t, err)
	resp, err := http.Post(h.srv.URL+"/v1/search?deadline_ms=500", "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s", raw)
	require.Contains(t, string(raw), "catalog")
}
