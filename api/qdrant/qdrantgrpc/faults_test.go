package qdrantgrpc_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/trawl-search/trawl/api/apikey"
	"github.com/trawl-search/trawl/api/qdrant/qdrantgrpc"
	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/internal/apitest"
)

// counter is one series of a router counter.
func counter(t *testing.T, e *apitest.Env, name string, labels map[string]string) float64 {
	t.Helper()
	mf := e.Gather()[name]
	require.NotNil(t, mf, name)
	for _, m := range mf.GetMetric() {
		match := 0
		for _, lp := range m.GetLabel() {
			if v, ok := labels[lp.GetName()]; ok && v == lp.GetValue() {
				match++
			}
		}
		if match == len(labels) {
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("%s%v: no such series", name, labels)
	return 0
}

// TestDegraded: with a whole shard stopped, answers still come (from the
// other shards) but are never silently partial: the trailer says
// degraded and names the shard, and the degraded counter moves by
// exactly one per answer; with allow-partial false, the answer is
// Unavailable.
func TestDegraded(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	cl := dial(e)
	e.StopShard("shard-1")
	searches := map[string]string{"path": "search", "collection": "trawl"}
	batches := map[string]string{"path": "search_batch", "collection": "trawl"}
	counts := map[string]string{"path": "count", "collection": "trawl"}
	d0, b0, c0 := counter(t, e, "trawl_scatter_degraded_total", searches), counter(t, e, "trawl_scatter_degraded_total", batches),
		counter(t, e, "trawl_scatter_degraded_total", counts)

	var tr metadata.MD
	res, err := cl.p.Query(call(t), &pb.QueryPoints{CollectionName: "trawl", Query: nearest(unit(0)), Limit: new(uint64(10))}, grpc.Trailer(&tr))
	require.NoError(t, err)
	require.Len(t, res.GetResult(), 10)
	require.Equal(t, []string{"true"}, tr.Get(qdrantgrpc.DegradedKey))
	require.Len(t, tr.Get(qdrantgrpc.UnavailableKey), 1)
	require.True(t, strings.HasPrefix(tr.Get(qdrantgrpc.UnavailableKey)[0], "shard-1="), tr.Get(qdrantgrpc.UnavailableKey)[0])
	require.Equal(t, d0+1, counter(t, e, "trawl_scatter_degraded_total", searches))

	tr = nil
	_, err = cl.p.QueryBatch(call(t), &pb.QueryBatchPoints{CollectionName: "trawl", QueryPoints: []*pb.QueryPoints{
		{Query: nearest(unit(0))}, {Query: nearest(unit(1))}}}, grpc.Trailer(&tr))
	require.NoError(t, err)
	require.Equal(t, []string{"true"}, tr.Get(qdrantgrpc.DegradedKey))
	require.Equal(t, b0+1, counter(t, e, "trawl_scatter_degraded_total", batches), "a batch is one fan-out")

	tr = nil
	n, err := cl.p.Count(call(t), &pb.CountPoints{CollectionName: "trawl"}, grpc.Trailer(&tr))
	require.NoError(t, err)
	require.Less(t, n.GetResult().GetCount(), uint64(300))
	require.Equal(t, []string{"true"}, tr.Get(qdrantgrpc.DegradedKey))
	require.Equal(t, c0+1, counter(t, e, "trawl_scatter_degraded_total", counts))

	// A facet counts on the count path; an ordered scroll lists on the
	// scroll path.
	tr = nil
	_, err = cl.p.Facet(call(t), &pb.FacetCounts{CollectionName: "trawl", Key: "color"}, grpc.Trailer(&tr))
	require.NoError(t, err)
	require.Equal(t, []string{"true"}, tr.Get(qdrantgrpc.DegradedKey))
	require.Equal(t, c0+2, counter(t, e, "trawl_scatter_degraded_total", counts))
	scrolls := map[string]string{"path": "scroll", "collection": "trawl"}
	s0 := counter(t, e, "trawl_scatter_degraded_total", scrolls)
	tr = nil
	_, err = cl.p.Scroll(call(t), &pb.ScrollPoints{CollectionName: "trawl", OrderBy: &pb.OrderBy{Key: "n"}}, grpc.Trailer(&tr))
	require.NoError(t, err)
	require.Equal(t, []string{"true"}, tr.Get(qdrantgrpc.DegradedKey))
	require.Equal(t, s0+1, counter(t, e, "trawl_scatter_degraded_total", scrolls))
	tr = nil
	_, err = cl.p.Facet(call(t, qdrantgrpc.AllowPartialKey, "false"), &pb.FacetCounts{CollectionName: "trawl", Key: "color"}, grpc.Trailer(&tr))
	code, msg := codeOf(err)
	require.Equal(t, codes.Unavailable, code, msg)
	require.Equal(t, []string{"true"}, tr.Get(qdrantgrpc.DegradedKey))

	tr = nil
	_, err = cl.p.Query(call(t, qdrantgrpc.AllowPartialKey, "false"), &pb.QueryPoints{CollectionName: "trawl", Query: nearest(unit(0))}, grpc.Trailer(&tr))
	code, msg = codeOf(err)
	require.Equal(t, codes.Unavailable, code, msg)
	require.Equal(t, "Service unavailable: 1 of 3 shards unavailable and allow_partial is false", msg)
	require.Equal(t, []string{"true"}, tr.Get(qdrantgrpc.DegradedKey))
	require.Equal(t, d0+2, counter(t, e, "trawl_scatter_degraded_total", searches), "a refused degraded answer counts too")

	// A grouped search is a search fan-out to find the groups, then a
	// batch for their hits: each degraded fan-out counts once.
	tr = nil
	_, err = cl.p.QueryGroups(call(t), &pb.QueryPointGroups{CollectionName: "trawl", Query: nearest(unit(0)), GroupBy: "color"}, grpc.Trailer(&tr))
	require.NoError(t, err)
	require.Equal(t, []string{"true"}, tr.Get(qdrantgrpc.DegradedKey))
	require.Greater(t, counter(t, e, "trawl_scatter_degraded_total", searches), d0+2)

	info, err := cl.c.Get(call(t), &pb.GetCollectionInfoRequest{CollectionName: "trawl"})
	require.NoError(t, err)
	require.Equal(t, pb.CollectionStatus_Yellow, info.GetResult().GetStatus())
}

// TestDeadline: the client's gRPC deadline is the query's, capped by the
// router's maximum (10 s here); without one the default applies, and
// Qdrant's timeout field (seconds) counts when it is shorter.
func TestDeadline(t *testing.T) {
	e := apitest.NewFake(t, apitest.FakeConfig{BuiltinDeadline: true})
	cl := dial(e)
	_, err := cl.c.Create(call(t), &pb.CreateCollection{CollectionName: "c", VectorsConfig: &pb.VectorsConfig{
		Config: &pb.VectorsConfig_Params{Params: &pb.VectorParams{Size: 2, Distance: pb.Distance_Euclid}}}})
	require.NoError(t, err)
	deadline := func(ctx context.Context, timeout *uint64) int {
		t.Helper()
		var tr metadata.MD
		_, err := cl.p.Count(ctx, &pb.CountPoints{CollectionName: "c", Timeout: timeout}, grpc.Trailer(&tr))
		require.NoError(t, err)
		require.Len(t, tr.Get(qdrantgrpc.DeadlineKey), 1)
		ms, err := strconv.Atoi(tr.Get(qdrantgrpc.DeadlineKey)[0])
		require.NoError(t, err)
		return ms
	}
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	ms := deadline(ctx, nil)
	require.True(t, ms > 400 && ms <= 600, "client deadline 600 ms: query deadline %d ms", ms)

	ctx, cancel = context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	require.Equal(t, 10000, deadline(ctx, nil), "capped at the maximum")
	require.Equal(t, 2000, deadline(ctx, new(uint64(2))), "timeout 2 s is shorter")

	require.Equal(t, 50, deadline(context.Background(), nil), "no deadline: the default")
}

// TestKeys: with --api-key-file, a call needs a key as Qdrant's clients
// send it (api-key metadata) or as a Bearer token; a missing or unknown
// key is Unauthenticated, one outside its scope PermissionDenied naming
// the collection. HealthCheck stays open.
func TestKeys(t *testing.T) {
	keys, err := apikey.Parse(strings.NewReader("admin\nreader docs read\n"))
	require.NoError(t, err)
	e := apitest.NewFake(t, apitest.FakeConfig{Keys: keys})
	cl := dial(e)
	_, err = cl.q.HealthCheck(call(t), &pb.HealthCheckRequest{})
	require.NoError(t, err)
	create := &pb.CreateCollection{CollectionName: "docs", VectorsConfig: &pb.VectorsConfig{
		Config: &pb.VectorsConfig_Params{Params: &pb.VectorParams{Size: 2, Distance: pb.Distance_Cosine}}}}
	for _, tc := range []struct {
		name string
		md   []string
		code codes.Code
		msg  string
	}{
		{"no key", nil, codes.Unauthenticated, "Unauthorized: missing or wrong API key: send it as api-key metadata or as authorization: Bearer <key>"},
		{"wrong key", []string{"api-key", "nope"}, codes.Unauthenticated, "Unauthorized: missing or wrong API key: send it as api-key metadata or as authorization: Bearer <key>"},
		{"read-only key writes", []string{"api-key", "reader"}, codes.PermissionDenied, "Forbidden: this API key does not grant write on collection `docs`"},
		{"api-key", []string{"api-key", "admin"}, codes.OK, ""},
		{"bearer", []string{"authorization", "Bearer admin"}, codes.OK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cl.c.Create(call(t, tc.md...), create)
			code, msg := codeOf(err)
			require.Equal(t, tc.code, code, msg)
			require.Equal(t, tc.msg, msg)
		})
	}
	_, err = cl.p.Count(call(t, "api-key", "reader"), &pb.CountPoints{CollectionName: "docs"})
	require.NoError(t, err)
	_, err = cl.p.Count(call(t, "api-key", "reader"), &pb.CountPoints{CollectionName: "other"})
	code, msg := codeOf(err)
	require.Equal(t, codes.PermissionDenied, code, msg)
	list, err := cl.c.List(call(t, "api-key", "reader"), &pb.ListCollectionsRequest{})
	require.NoError(t, err)
	require.Len(t, list.GetCollections(), 1)
}

// TestAdmission: the router's limiter covers the gRPC port: past
// --max-inflight a call is refused at once with ResourceExhausted, a
// retry-after trailer (which Qdrant's Go client reads) and the refusal
// counted; once the slot is free, calls pass again.
func TestAdmission(t *testing.T) {
	e := apitest.New(t, apitest.Config{MaxInflight: 2})
	cl := dial(e)
	held, err := e.R.Limiter.Acquire(2, time.Second) // the HTTP port's queries, say
	require.NoError(t, err)
	r0 := counter(t, e, "trawl_admission_rejected_total", map[string]string{"reason": "max_inflight"})
	var tr metadata.MD
	start := time.Now()
	_, err = cl.p.Query(call(t), &pb.QueryPoints{CollectionName: "trawl", Query: nearest(unit(0))}, grpc.Trailer(&tr))
	code, msg := codeOf(err)
	require.Equal(t, codes.ResourceExhausted, code, msg)
	require.True(t, strings.HasPrefix(msg, "Too many requests: "), msg)
	require.Less(t, time.Since(start), time.Second, "refused fast")
	require.Equal(t, []string{"1"}, tr.Get("retry-after"))
	require.Equal(t, r0+1, counter(t, e, "trawl_admission_rejected_total", map[string]string{"reason": "max_inflight"}))
	held.Done(time.Millisecond, false)
	_, err = cl.p.Query(call(t), &pb.QueryPoints{CollectionName: "trawl", Query: nearest(unit(0))})
	require.NoError(t, err)
}
