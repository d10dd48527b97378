package qdrantgrpc_test

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/trawl-search/trawl/api/qdrant/qdrantgrpc"
	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/internal/apitest"
)

// readsPoint is a point of TestReads's corpus.
type readsPoint struct {
	id     uint64
	vector []float32
	tags   []string // written as a list (with repeats), counted once each
	rank   int64    // written as an integer
	score  float64  // written as a double, 0 for none
}

// TestReads: Facet and Scroll with order_by through the real gRPC server
// over a 3-shard cluster, each answer equal to a brute force over what
// was written, and complete in its trailer.
func TestReads(t *testing.T) {
	e := apitest.New(t, apitest.Config{})
	cl := dial(e)
	rng := rand.New(rand.NewPCG(5, 0))
	tags := []string{"go", "rust", "zig", "c"}
	pts := make([]readsPoint, 120)
	var ps []*pb.PointStruct
	for i := range pts {
		p := readsPoint{id: uint64(1000 + i), vector: make([]float32, apitest.Dim), rank: int64(rng.IntN(7))}
		for j := range p.vector {
			p.vector[j] = float32(rng.NormFloat64())
		}
		pl := map[string]*pb.Value{"suite": str("reads"), "rank": integer(p.rank)}
		if i%3 != 0 {
			p.tags = []string{tags[rng.IntN(4)], tags[rng.IntN(4)]}
			pl["tags"] = &pb.Value{Kind: &pb.Value_ListValue{ListValue: &pb.ListValue{Values: []*pb.Value{str(p.tags[0]), str(p.tags[1])}}}}
		}
		if i%4 != 0 {
			p.score = float64(rng.IntN(1000))/10 + 0.25
			pl["score"] = &pb.Value{Kind: &pb.Value_DoubleValue{DoubleValue: p.score}}
		}
		pts[i] = p
		ps = append(ps, &pb.PointStruct{Id: num(p.id), Vectors: dense(p.vector), Payload: pl})
	}
	_, err := cl.p.Upsert(call(t), &pb.UpsertPoints{CollectionName: "trawl", Points: ps})
	require.NoError(t, err)
	suite := &pb.Filter{Must: []*pb.Condition{keyword("suite", "reads")}}

	t.Run("facet", func(t *testing.T) {
		count := map[string]uint64{}
		for _, p := range pts {
			seen := map[string]bool{}
			for _, tg := range p.tags {
				if !seen[tg] {
					seen[tg] = true
					count[tg]++
				}
			}
		}
		var want []*pb.FacetHit
		for v, n := range count {
			want = append(want, &pb.FacetHit{Value: &pb.FacetValue{Variant: &pb.FacetValue_StringValue{StringValue: v}}, Count: n})
		}
		slices.SortFunc(want, func(a, b *pb.FacetHit) int {
			if c := cmp.Compare(b.Count, a.Count); c != 0 {
				return c
			}
			return cmp.Compare(a.GetValue().GetStringValue(), b.GetValue().GetStringValue())
		})
		var tr metadata.MD
		res, err := cl.p.Facet(call(t), &pb.FacetCounts{CollectionName: "trawl", Key: "tags", Filter: suite, Limit: new(uint64(3))}, grpc.Trailer(&tr))
		require.NoError(t, err)
		require.Len(t, res.GetHits(), 3)
		for i, h := range res.GetHits() {
			require.Equal(t, want[i].GetValue().GetStringValue(), h.GetValue().GetStringValue(), "hit %d", i)
			require.Equal(t, want[i].GetCount(), h.GetCount(), "hit %d", i)
		}
		require.Equal(t, []string{"false"}, tr.Get(qdrantgrpc.DegradedKey))

		ranks := map[int64]uint64{}
		for _, p := range pts {
			ranks[p.rank]++
		}
		res, err = cl.p.Facet(call(t), &pb.FacetCounts{CollectionName: "trawl", Key: "rank", Filter: suite, Limit: new(uint64(100))})
		require.NoError(t, err)
		require.Len(t, res.GetHits(), len(ranks))
		for i, h := range res.GetHits() {
			v := h.GetValue().GetIntegerValue()
			require.IsType(t, &pb.FacetValue_IntegerValue{}, h.GetValue().GetVariant())
			require.Equal(t, ranks[v], h.GetCount(), "rank %d", v)
			if i > 0 {
				prev := res.GetHits()[i-1]
				require.True(t, prev.GetCount() > h.GetCount() || prev.GetCount() == h.GetCount() && prev.GetValue().GetIntegerValue() < v)
			}
		}
	})

	t.Run("scroll order_by", func(t *testing.T) {
		type entry struct {
			id    uint64
			score float64
		}
		var all []entry
		for _, p := range pts {
			if p.score != 0 {
				all = append(all, entry{p.id, p.score})
			}
		}
		for _, tc := range []struct {
			desc  bool
			start *pb.StartFrom
			from  float64
		}{
			{false, nil, 0},
			{true, nil, 0},
			{false, &pb.StartFrom{Value: &pb.StartFrom_Float{Float: 50.25}}, 50.25},
			{true, &pb.StartFrom{Value: &pb.StartFrom_Integer{Integer: 30}}, 30},
		} {
			var want []entry
			for _, en := range all {
				if tc.start == nil || !tc.desc && en.score >= tc.from || tc.desc && en.score <= tc.from {
					want = append(want, en)
				}
			}
			slices.SortFunc(want, func(a, b entry) int {
				c := cmp.Or(cmp.Compare(a.score, b.score), cmp.Compare(a.id, b.id))
				if tc.desc {
					return -c
				}
				return c
			})
			want = want[:min(25, len(want))]
			dir := pb.Direction_Asc
			if tc.desc {
				dir = pb.Direction_Desc
			}
			var tr metadata.MD
			res, err := cl.p.Scroll(call(t), &pb.ScrollPoints{CollectionName: "trawl", Filter: suite, Limit: new(uint32(25)),
				OrderBy: &pb.OrderBy{Key: "score", Direction: &dir, StartFrom: tc.start}}, grpc.Trailer(&tr))
			require.NoError(t, err)
			require.Len(t, res.GetResult(), len(want))
			for i, rp := range res.GetResult() {
				require.Equal(t, want[i].id, rp.GetId().GetNum(), "point %d", i)
				require.Equal(t, want[i].score, rp.GetOrderValue().GetFloat(), "point %d", i)
				require.Equal(t, "reads", rp.GetPayload()["suite"].GetStringValue())
			}
			require.Nil(t, res.GetNextPageOffset(), "no next page with order_by, as Qdrant")
			require.Equal(t, []string{"false"}, tr.Get(qdrantgrpc.DegradedKey))
		}
		// An integer key's order_value is an integer.
		res, err := cl.p.Scroll(call(t), &pb.ScrollPoints{CollectionName: "trawl", Filter: suite, Limit: new(uint32(1)),
			OrderBy: &pb.OrderBy{Key: "rank"}})
		require.NoError(t, err)
		require.Len(t, res.GetResult(), 1)
		require.IsType(t, &pb.OrderValue_Int{}, res.GetResult()[0].GetOrderValue().GetVariant())
	})

	t.Run("recommend", func(t *testing.T) {
		// The collection is cosine: stored vectors are unit length, and a
		// score is the cosine with 2·avg(positive) − avg(negative).
		unitLen := func(v []float32) []float64 {
			n := 0.0
			for _, x := range v {
				n += float64(x) * float64(x)
			}
			out := make([]float64, len(v))
			for i, x := range v {
				out[i] = float64(x) / math.Sqrt(n)
			}
			return out
		}
		byID := map[uint64]readsPoint{}
		for _, p := range pts {
			byID[p.id] = p
		}
		extra := []float32{1, 0, -1, 0.5, 0, 0, 2, -0.25}
		brute := func(pos, neg []uint64, withExtra bool, k int) []uint64 {
			q := make([]float64, apitest.Dim)
			add := func(ids []uint64, extra []float32, sign float64) {
				n := float64(len(ids))
				if extra != nil {
					n++
				}
				for _, id := range ids {
					for j, x := range unitLen(byID[id].vector) {
						q[j] += sign * x / n
					}
				}
				for j, x := range extra {
					q[j] += sign * float64(x) / n
				}
			}
			var ex []float32
			if withExtra {
				ex = extra
			}
			add(pos, ex, 2)
			if len(neg) > 0 {
				add(neg, nil, -1)
			} else {
				for j := range q {
					q[j] /= 2
				}
			}
			type scored struct {
				id uint64
				s  float64
			}
			var all []scored
			for _, p := range pts {
				if slices.Contains(pos, p.id) || slices.Contains(neg, p.id) {
					continue
				}
				s := 0.0
				for j, x := range unitLen(p.vector) {
					s += x * q[j]
				}
				all = append(all, scored{p.id, s})
			}
			slices.SortFunc(all, func(a, b scored) int { return cmp.Compare(b.s, a.s) })
			var ids []uint64
			for _, a := range all[:k] {
				ids = append(ids, a.id)
			}
			return ids
		}
		ids := func(sps []*pb.ScoredPoint) []uint64 {
			var out []uint64
			for _, sp := range sps {
				out = append(out, sp.GetId().GetNum())
			}
			return out
		}
		var tr metadata.MD
		q, err := cl.p.Query(call(t), &pb.QueryPoints{CollectionName: "trawl", Filter: suite, Limit: new(uint64(15)),
			Query: &pb.Query{Variant: &pb.Query_Recommend{Recommend: &pb.RecommendInput{
				Positive: []*pb.VectorInput{{Variant: &pb.VectorInput_Id{Id: num(1003)}}, {Variant: &pb.VectorInput_Dense{Dense: &pb.DenseVector{Data: extra}}}},
				Negative: []*pb.VectorInput{{Variant: &pb.VectorInput_Id{Id: num(1050)}}},
				Strategy: pb.RecommendStrategy_AverageVector.Enum()}}}}, grpc.Trailer(&tr))
		require.NoError(t, err)
		require.Equal(t, brute([]uint64{1003}, []uint64{1050}, true, 15), ids(q.GetResult()))
		require.Equal(t, []string{"false"}, tr.Get(qdrantgrpc.DegradedKey))

		rec, err := cl.p.Recommend(call(t), &pb.RecommendPoints{CollectionName: "trawl", Filter: suite, Limit: 9,
			Positive: []*pb.PointId{num(1010), num(1011)}})
		require.NoError(t, err)
		require.Equal(t, brute([]uint64{1010, 1011}, nil, false, 9), ids(rec.GetResult()))

		batch, err := cl.p.RecommendBatch(call(t), &pb.RecommendBatchPoints{CollectionName: "trawl", RecommendPoints: []*pb.RecommendPoints{
			{Filter: suite, Limit: 4, Positive: []*pb.PointId{num(1020)}},
			{Filter: suite, Limit: 6, Positive: []*pb.PointId{num(1021)}, Negative: []*pb.PointId{num(1022)}, PositiveVectors: []*pb.Vector{
				{Vector: &pb.Vector_Dense{Dense: &pb.DenseVector{Data: extra}}}}},
		}})
		require.NoError(t, err)
		require.Len(t, batch.GetResult(), 2)
		require.Equal(t, brute([]uint64{1020}, nil, false, 4), ids(batch.GetResult()[0].GetResult()))
		require.Equal(t, brute([]uint64{1021}, []uint64{1022}, true, 6), ids(batch.GetResult()[1].GetResult()))
	})

	t.Run("groups", func(t *testing.T) {
		// The collection is cosine: the score is the cosine.
		cosine := func(a, b []float32) float64 {
			var ab, aa, bb float64
			for j := range a {
				ab += float64(a[j]) * float64(b[j])
				aa += float64(a[j]) * float64(a[j])
				bb += float64(b[j]) * float64(b[j])
			}
			return ab / math.Sqrt(aa*bb)
		}
		rank := func(q []float32, except uint64) []readsPoint {
			out := slices.DeleteFunc(slices.Clone(pts), func(p readsPoint) bool { return p.id == except })
			slices.SortFunc(out, func(a, b readsPoint) int { return cmp.Compare(cosine(b.vector, q), cosine(a.vector, q)) })
			return out
		}
		q := []float32{1, -0.5, 0.25, 0, 2, -1, 0.5, 0.75}
		ranked := rank(q, 0)
		type group struct {
			id   string
			hits []uint64
		}
		brute := func(values func(readsPoint) []string, size, limit int) []group {
			var out []group
			for _, p := range ranked {
				for _, v := range values(p) {
					if len(out) < limit && !slices.ContainsFunc(out, func(g group) bool { return g.id == v }) {
						out = append(out, group{id: v})
					}
				}
			}
			for i := range out {
				for _, p := range ranked {
					if len(out[i].hits) < size && slices.Contains(values(p), out[i].id) {
						out[i].hits = append(out[i].hits, p.id)
					}
				}
			}
			return out
		}
		got := func(gs []*pb.PointGroup) []group {
			var out []group
			for _, g := range gs {
				id := g.GetId().GetStringValue()
				if u, ok := g.GetId().GetKind().(*pb.GroupId_UnsignedValue); ok {
					id = strconv.FormatUint(u.UnsignedValue, 10)
				}
				var hits []uint64
				for _, h := range g.GetHits() {
					hits = append(hits, h.GetId().GetNum())
				}
				out = append(out, group{id, hits})
			}
			return out
		}
		byTag := func(p readsPoint) []string {
			var out []string
			for _, tg := range p.tags {
				if !slices.Contains(out, tg) {
					out = append(out, tg)
				}
			}
			return out
		}
		byRank := func(p readsPoint) []string { return []string{strconv.FormatInt(p.rank, 10)} }

		var tr metadata.MD
		sg, err := cl.p.SearchGroups(call(t), &pb.SearchPointGroups{CollectionName: "trawl", Vector: q, Filter: suite, GroupBy: "tags",
			GroupSize: 4, Limit: 3}, grpc.Trailer(&tr))
		require.NoError(t, err)
		require.Equal(t, brute(byTag, 4, 3), got(sg.GetResult().GetGroups()))
		require.Equal(t, []string{"false"}, tr.Get(qdrantgrpc.DegradedKey))

		qg, err := cl.p.QueryGroups(call(t), &pb.QueryPointGroups{CollectionName: "trawl", Query: nearest(q), Filter: suite, GroupBy: "rank"})
		require.NoError(t, err)
		require.Equal(t, brute(byRank, 3, 10), got(qg.GetResult().GetGroups()))

		// A recommendation by one point: its (unit) vector, the point left
		// out.
		ranked = rank(pts[30].vector, pts[30].id)
		rg, err := cl.p.RecommendGroups(call(t), &pb.RecommendPointGroups{CollectionName: "trawl", Positive: []*pb.PointId{num(pts[30].id)},
			Filter: suite, GroupBy: "tags", GroupSize: 2, Limit: 2})
		require.NoError(t, err)
		require.Equal(t, brute(byTag, 2, 2), got(rg.GetResult().GetGroups()))
	})
}
