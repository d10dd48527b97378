package app_test

// The cost of collections, measured on the router dev shape (3 shards ×
// 3 replicas in one process):
//
//	TRAWL_MEASURE_COLLECTIONS=1 go test -run TestMeasureCollections -v -timeout 30m ./internal/app
//
// It reports the heap an empty collection adds to a replica, create and
// delete latency, and the query p50 of one 1 000-vector collection alone
// and then beside 99 more of the same size — the ratio is the figure
// (docs/performance.md). TRAWL_MEASURE_DIM sets the dimension (1536).

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/internal/devcluster"
	"github.com/trawl-search/trawl/vector"
)

func TestMeasureCollections(t *testing.T) {
	if os.Getenv("TRAWL_MEASURE_COLLECTIONS") == "" {
		t.Skip("a measurement: TRAWL_MEASURE_COLLECTIONS=1")
	}
	dim := 1536
	if s := os.Getenv("TRAWL_MEASURE_DIM"); s != "" {
		var err error
		dim, err = strconv.Atoi(s)
		require.NoError(t, err)
	}
	const (
		colls   = 100
		perColl = 1000
		queries = 400
	)
	kernel, err := vector.FromEnv()
	require.NoError(t, err)
	dc, err := devcluster.Start(devcluster.Config{Shards: 3, Replicas: 3, Dim: dim, Kernel: kernel})
	require.NoError(t, err)
	t.Cleanup(dc.Close)
	a, _, _ := routerOver(t, dc)
	rng := rand.New(rand.NewPCG(1, 2))

	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	b64 := func(v []float32) string {
		buf := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(x))
		}
		return base64.StdEncoding.EncodeToString(buf)
	}
	fill := func(name string) {
		for from := 0; from < perColl; from += 256 {
			var vs []map[string]any
			for i := from; i < min(from+256, perColl); i++ {
				vs = append(vs, map[string]any{"id": fmt.Sprint("d", i), "vector_b64": b64(randomVector(rng, dim))})
			}
			code, raw := a.do(http.MethodPost, "/v1/collections/"+name+"/vectors", map[string]any{"vectors": vs})
			require.Equal(t, http.StatusOK, code, "%s", raw)
		}
	}
	p50 := func(name string) time.Duration {
		body, err := json.Marshal(map[string]any{"vector_b64": b64(randomVector(rng, dim)), "k": 10})
		require.NoError(t, err)
		var ds []time.Duration
		for range queries {
			t0 := time.Now()
			resp, err := http.Post(a.url+"/v1/collections/"+name+"/search", "application/json", bytes.NewReader(body))
			require.NoError(t, err)
			var ans answer
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&ans))
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.False(t, ans.ScatterGather.Degraded)
			ds = append(ds, time.Since(t0))
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	quantiles := func(ds []time.Duration) string {
		slices.Sort(ds)
		return fmt.Sprintf("p50 %v, p99 %v", ds[len(ds)/2].Round(10*time.Microsecond), ds[len(ds)*99/100].Round(10*time.Microsecond))
	}

	// One collection alone: the baseline.
	code, raw := a.create("solo", catalogSettings(dim))
	require.Equal(t, http.StatusOK, code, "%s", raw)
	fill("solo")
	alone := p50("solo")

	// 99 empty collections: create latency, and the heap they add.
	before := heap()
	var creates []time.Duration
	for i := range colls - 1 {
		t0 := time.Now()
		code, raw := a.create(fmt.Sprint("c", i), catalogSettings(dim))
		creates = append(creates, time.Since(t0))
		require.Equal(t, http.StatusOK, code, "%s", raw)
	}
	perEmpty := float64(heap()-before) / float64((colls-1)*3*3)

	// Filled, beside the one measured.
	for i := range colls - 1 {
		fill(fmt.Sprint("c", i))
	}
	beside := p50("solo")

	var drops []time.Duration
	for i := range colls - 1 {
		t0 := time.Now()
		code, raw := a.do(http.MethodDelete, fmt.Sprint("/v1/collections/c", i), nil)
		drops = append(drops, time.Since(t0))
		require.Equal(t, http.StatusOK, code, "%s", raw)
	}
	t.Logf("machine: %d CPUs, kernel %s, %d-D cosine, 3 shards x 3 replicas in one process", runtime.NumCPU(), kernel.Name, dim)
	t.Logf("heap per empty collection per replica: %.0f bytes (%d collections x 9 replicas)", perEmpty, colls-1)
	t.Logf("create: %s; delete: %s (%d each)", quantiles(creates), quantiles(drops), colls-1)
	t.Logf("query p50 of one %d-vector collection: alone %v, beside %d more of the same size %v (ratio %.2f)",
		perColl, alone.Round(10*time.Microsecond), colls-1, beside.Round(10*time.Microsecond), float64(beside)/float64(alone))
}

// catalogSettings is a flat cosine collection of dim dimensions.
func catalogSettings(dim int) catalog.Settings {
	return catalog.Settings{Dim: dim, Metric: vector.Cosine}.Normalize()
}
