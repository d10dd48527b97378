// Command compat drives a running `router dev` through Qdrant's official
// Go client (github.com/qdrant/go-client, which speaks only gRPC),
// unchanged, and checks every answer against a brute force computed here:
// two collections of different sizes created through the client, upserts
// with payloads, filtered queries and a query batch, scroll to the end,
// count, get, facet, search/query/recommend groups, recommend, scroll
// order_by, collection update (int8 on and off), delete by filter, bad input, a replica of every shard
// blackholed (answers stay complete) and a whole shard stopped (answers
// are marked degraded in the trailer), then both collections deleted. It
// prints every client call and its result and exits non-zero on the
// first mismatch. With -bench N it instead measures query latency through
// gRPC and through the REST routes for the same queries.
//
// TRAWL_URL is the router's HTTP API (for the dev fault endpoints and the
// REST side of -bench), TRAWL_GRPC its --qdrant-grpc-addr (host:port).
// It lives in its own module, so the product's go.mod never requires the
// client.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func main() {
	bench := flag.Int("bench", 0, "measure N queries through gRPC and REST instead of the compatibility run")
	collection := flag.String("collection", "trawl", "the collection -bench queries")
	flag.Parse()
	url, addr := os.Getenv("TRAWL_URL"), os.Getenv("TRAWL_GRPC")
	if url == "" || addr == "" {
		fail("TRAWL_URL and TRAWL_GRPC must be set")
	}
	host, portText, err := net.SplitHostPort(addr)
	check(err)
	port, err := strconv.Atoi(portText)
	check(err)
	client, err := qdrant.NewClient(&qdrant.Config{Host: host, Port: port})
	check(err)
	defer client.Close()
	r := &run{c: client, url: url}
	if *bench > 0 {
		r.bench(*collection, *bench)
		return
	}
	r.compat()
	fmt.Printf("test-compat (go): %d calls, all answers as expected\n", r.calls)
}

// run is one compatibility run.
type run struct {
	c     *qdrant.Client
	url   string
	calls int
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "FAIL: "+format+"\n", args...)
	os.Exit(1)
}

func check(err error) {
	if err != nil {
		fail("%v", err)
	}
}

func expect(ok bool, format string, args ...any) {
	if !ok {
		fail(format, args...)
	}
}

// ctx is one call's context: a 5 s deadline, the query's deadline at the
// router (capped by --max-deadline-ms).
func ctx() context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = cancel // the timer ends with the deadline; runs are short
	return c
}

// show prints a call and its result.
func (r *run) show(name string, args, result any) {
	r.calls++
	s := fmt.Sprint(result)
	if b, err := json.Marshal(result); err == nil {
		s = string(b)
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	fmt.Printf("#%d %s(%v)\n    -> %s\n", r.calls, name, args, s)
}

// doc is one point as the run wrote it.
type doc struct {
	id   *qdrant.PointId
	key  string // the id as text, for ordering ties like the router (integers before UUIDs, see idKey)
	vec  []float32
	lang string
	year int64
	tags []string
}

// coll is a collection of the run and what it holds.
type coll struct {
	name   string
	dim    int
	metric qdrant.Distance
	docs   []doc
}

var langs = []string{"en", "en", "de", "fr", "ja"}
var tagSet = []string{"go", "rust", "search", "vectors"}

// makeDocs builds n points: integer ids, and every fifth a UUID.
func makeDocs(rng *rand.Rand, n, dim int, metric qdrant.Distance) []doc {
	out := make([]doc, n)
	for i := range out {
		v := make([]float32, dim)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		d := doc{vec: v, lang: langs[rng.IntN(len(langs))], year: int64(2000 + rng.IntN(26))}
		for _, t := range tagSet {
			if rng.IntN(3) == 0 {
				d.tags = append(d.tags, t)
			}
		}
		if i%5 == 4 {
			u := fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", rng.Uint32(), rng.IntN(1<<16), rng.IntN(1<<12), rng.IntN(1<<12), rng.Uint64()&(1<<48-1))
			d.id, d.key = qdrant.NewID(u), u
		} else {
			n := uint64(1000 + i)
			d.id, d.key = qdrant.NewIDNum(n), strconv.FormatUint(n, 10)
		}
		if metric == qdrant.Distance_Cosine {
			d.vec = normalised(d.vec)
		}
		out[i] = d
	}
	return out
}

func normalised(v []float32) []float32 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	n := math.Sqrt(s)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / n)
	}
	return out
}

func (d doc) payload() map[string]*qdrant.Value {
	tags := make([]any, len(d.tags))
	for i, t := range d.tags {
		tags[i] = t
	}
	return qdrant.NewValueMap(map[string]any{"lang": d.lang, "year": d.year, "tags": tags})
}

// pred is a filter both as the client sends it and as the brute force
// applies it.
type pred struct {
	name   string
	filter *qdrant.Filter
	match  func(doc) bool
}

func preds() []pred {
	return []pred{
		{"none", nil, func(doc) bool { return true }},
		{"lang = en", &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewMatch("lang", "en")}}, func(d doc) bool { return d.lang == "en" }},
		{"year in [2010, 2020) and not ja", &qdrant.Filter{
			Must:    []*qdrant.Condition{qdrant.NewRange("year", &qdrant.Range{Gte: qdrant.PtrOf(2010.0), Lt: qdrant.PtrOf(2020.0)})},
			MustNot: []*qdrant.Condition{qdrant.NewMatch("lang", "ja")}},
			func(d doc) bool { return d.year >= 2010 && d.year < 2020 && d.lang != "ja" }},
		{"tags any of go, rust, or year 2025", &qdrant.Filter{Should: []*qdrant.Condition{
			qdrant.NewMatchKeywords("tags", "go", "rust"), qdrant.NewMatchInt("year", 2025)}},
			func(d doc) bool {
				return slices.Contains(d.tags, "go") || slices.Contains(d.tags, "rust") || d.year == 2025
			}},
		{"tags empty", &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewIsEmpty("tags")}}, func(d doc) bool { return len(d.tags) == 0 }},
	}
}

// score is the brute-force score of v for q under the metric, and
// whether higher is better.
func score(metric qdrant.Distance, q, v []float32) float64 {
	var s float64
	switch metric {
	case qdrant.Distance_Euclid:
		for i := range q {
			d := float64(q[i]) - float64(v[i])
			s += d * d
		}
		return math.Sqrt(s)
	case qdrant.Distance_Cosine:
		q = normalised(q)
	}
	for i := range q {
		s += float64(q[i]) * float64(v[i])
	}
	return s
}

// idLess orders ids as the router breaks score ties: integer ids by value
// before any string id, strings bytewise.
func idLess(a, b string) bool {
	na, aNum := strconv.ParseUint(a, 10, 64)
	nb, bNum := strconv.ParseUint(b, 10, 64)
	switch {
	case aNum == nil && bNum == nil:
		return na < nb
	case aNum == nil:
		return true
	case bNum == nil:
		return false
	}
	return a < b
}

type hit struct {
	key   string
	score float64
}

func bruteForce(c *coll, q []float32, p pred, k int) []hit {
	var hs []hit
	for _, d := range c.docs {
		if p.match(d) {
			hs = append(hs, hit{d.key, score(c.metric, q, d.vec)})
		}
	}
	lower := c.metric == qdrant.Distance_Euclid
	sort.Slice(hs, func(i, j int) bool {
		if hs[i].score != hs[j].score {
			return (hs[i].score < hs[j].score) == lower
		}
		return idLess(hs[i].key, hs[j].key)
	})
	return hs[:min(k, len(hs))]
}

func idText(id *qdrant.PointId) string {
	if u := id.GetUuid(); u != "" {
		return u
	}
	return strconv.FormatUint(id.GetNum(), 10)
}

// sameHits checks an answer against the brute force: the same ids in the
// same order, scores within the contract's bound. Near-ties may swap.
func sameHits(what string, got []*qdrant.ScoredPoint, want []hit) {
	expect(len(got) == len(want), "%s: %d hits, want %d", what, len(got), len(want))
	for i, h := range got {
		expect(math.Abs(float64(h.GetScore())-want[i].score) <= 1e-4*math.Max(1, math.Abs(want[i].score)),
			"%s: hit %d score %v, want %v (id %s, want %s)", what, i, h.GetScore(), want[i].score, idText(h.GetId()), want[i].key)
		if idText(h.GetId()) != want[i].key {
			// only a near-tie may order differently
			expect(math.Abs(want[i].score-float64(h.GetScore())) < 1e-5, "%s: hit %d is %s, want %s", what, i, idText(h.GetId()), want[i].key)
		}
	}
}

func (r *run) compat() {
	v, err := r.c.HealthCheck(ctx())
	check(err)
	r.show("HealthCheck", "", map[string]string{"title": v.GetTitle(), "version": v.GetVersion()})

	rng := rand.New(rand.NewPCG(7, 11))
	colls := []*coll{
		{name: "go_compat_small", dim: 24, metric: qdrant.Distance_Dot},
		{name: "go_compat_large", dim: 384, metric: qdrant.Distance_Cosine},
	}
	colls[0].docs = makeDocs(rng, 400, colls[0].dim, colls[0].metric)
	colls[1].docs = makeDocs(rng, 250, colls[1].dim, colls[1].metric)
	for _, c := range colls {
		r.create(c)
	}
	for _, c := range colls {
		r.queries(c, rng)
	}
	r.twins(colls[0], rng)
	r.badInput(colls[0])
	r.faults(colls[1], rng)
	for _, c := range colls {
		r.deleteByFilter(c)
	}
	r.sparse()
	for _, c := range colls {
		check(r.c.DeleteCollection(ctx(), c.name))
		r.show("DeleteCollection", c.name, "ok")
		ok, err := r.c.CollectionExists(ctx(), c.name)
		check(err)
		r.show("CollectionExists", c.name, ok)
		expect(!ok, "%s exists after its delete", c.name)
	}
}

func (r *run) create(c *coll) {
	// Left over from an interrupted run: start clean.
	if ok, err := r.c.CollectionExists(ctx(), c.name); err == nil && ok {
		check(r.c.DeleteCollection(ctx(), c.name))
	}
	req := &qdrant.CreateCollection{CollectionName: c.name,
		VectorsConfig: qdrant.NewVectorsConfig(&qdrant.VectorParams{Size: uint64(c.dim), Distance: c.metric})}
	check(r.c.CreateCollection(ctx(), req))
	r.show("CreateCollection", fmt.Sprintf("%s, size %d, %s", c.name, c.dim, c.metric), "ok")
	// Upsert in batches of 100, waiting, with payloads.
	for i := 0; i < len(c.docs); i += 100 {
		var pts []*qdrant.PointStruct
		for _, d := range c.docs[i:min(i+100, len(c.docs))] {
			pts = append(pts, &qdrant.PointStruct{Id: d.id, Vectors: qdrant.NewVectors(d.vec...), Payload: d.payload()})
		}
		res, err := r.c.Upsert(ctx(), &qdrant.UpsertPoints{CollectionName: c.name, Wait: qdrant.PtrOf(true), Points: pts})
		check(err)
		r.show("Upsert", fmt.Sprintf("%s, %d points", c.name, len(pts)), res.GetStatus().String())
		expect(res.GetStatus() == qdrant.UpdateStatus_Completed, "upsert: %s", res.GetStatus())
	}
	_, err := r.c.CreateFieldIndex(ctx(), &qdrant.CreateFieldIndexCollection{CollectionName: c.name, FieldName: "lang",
		FieldType: qdrant.FieldType_FieldTypeKeyword.Enum()})
	check(err)
	info, err := r.c.GetCollectionInfo(ctx(), c.name)
	check(err)
	r.show("GetCollectionInfo", c.name, map[string]any{"status": info.GetStatus().String(), "points_count": info.GetPointsCount(),
		"size": info.GetConfig().GetParams().GetVectorsConfig().GetParams().GetSize(), "payload_schema": len(info.GetPayloadSchema())})
	expect(info.GetPointsCount() == uint64(len(c.docs)), "points_count %d, want %d", info.GetPointsCount(), len(c.docs))
	expect(info.GetConfig().GetParams().GetVectorsConfig().GetParams().GetSize() == uint64(c.dim), "size")
	names, err := r.c.ListCollections(ctx())
	check(err)
	r.show("ListCollections", "", names)
	expect(slices.Contains(names, c.name), "%s not listed", c.name)
}

func (r *run) queries(c *coll, rng *rand.Rand) {
	// Query with each filter: the brute force.
	for _, p := range preds() {
		q := make([]float32, c.dim)
		for j := range q {
			q[j] = float32(rng.NormFloat64())
		}
		res, err := r.c.Query(ctx(), &qdrant.QueryPoints{CollectionName: c.name, Query: qdrant.NewQuery(q...), Filter: p.filter,
			Limit: qdrant.PtrOf(uint64(10)), WithPayload: qdrant.NewWithPayload(true)})
		check(err)
		r.show("Query", fmt.Sprintf("%s, filter %s, limit 10", c.name, p.name), hitsText(res))
		sameHits(c.name+" query, filter "+p.name, res, bruteForce(c, q, p, 10))
		for _, h := range res {
			d := c.find(idText(h.GetId()))
			expect(h.GetPayload()["lang"].GetStringValue() == d.lang && h.GetPayload()["year"].GetIntegerValue() == d.year,
				"%s: payload of %s is %v", c.name, idText(h.GetId()), h.GetPayload())
		}
	}
	// QueryBatch: each query of the batch equals the brute force.
	ps := preds()
	var batch []*qdrant.QueryPoints
	var qs [][]float32
	for i := range 4 {
		q := make([]float32, c.dim)
		for j := range q {
			q[j] = float32(rng.NormFloat64())
		}
		qs = append(qs, q)
		batch = append(batch, &qdrant.QueryPoints{CollectionName: c.name, Query: qdrant.NewQuery(q...), Filter: ps[i%len(ps)].filter, Limit: qdrant.PtrOf(uint64(5))})
	}
	br, err := r.c.QueryBatch(ctx(), &qdrant.QueryBatchPoints{CollectionName: c.name, QueryPoints: batch})
	check(err)
	r.show("QueryBatch", fmt.Sprintf("%s, 4 queries, limit 5", c.name), len(br))
	expect(len(br) == 4, "query batch: %d results", len(br))
	for i, b := range br {
		sameHits(fmt.Sprintf("%s query batch %d", c.name, i), b.GetResult(), bruteForce(c, qs[i], ps[i%len(ps)], 5))
	}
	// Hybrid-style: a dense prefetch and a filtered one fused by RRF
	// (Qdrant's k = 2, positions from 0), against the fusion of the
	// brute-force lists.
	{
		q1, q2 := qs[0], qs[1]
		lists := [][]hit{bruteForce(c, q1, ps[0], 10), bruteForce(c, q2, ps[1], 10)}
		sum := map[string]float64{}
		for _, l := range lists {
			for pos, h := range l {
				sum[h.key] += float64(float32(1) / float32(pos+2))
			}
		}
		var want []hit
		for k, s := range sum {
			want = append(want, hit{k, s})
		}
		sort.Slice(want, func(i, j int) bool {
			if want[i].score != want[j].score {
				return want[i].score > want[j].score
			}
			return want[i].key < want[j].key // the router breaks ties by id as text
		})
		res, err := r.c.Query(ctx(), &qdrant.QueryPoints{CollectionName: c.name, Query: qdrant.NewQueryFusion(qdrant.Fusion_RRF),
			Prefetch: []*qdrant.PrefetchQuery{{Query: qdrant.NewQuery(q1...), Limit: qdrant.PtrOf(uint64(10))},
				{Query: qdrant.NewQuery(q2...), Filter: ps[1].filter, Limit: qdrant.PtrOf(uint64(10))}},
			Limit: qdrant.PtrOf(uint64(8))})
		check(err)
		r.show("Query", fmt.Sprintf("%s, prefetch [dense, %s], fusion RRF, limit 8", c.name, ps[1].name), hitsText(res))
		sameHits(c.name+" query fusion rrf", res, want[:min(8, len(want))])
	}
	// Scroll to the end, 64 a page: every point once.
	seen := map[string]bool{}
	var offset *qdrant.PointId
	for page := 0; ; page++ {
		expect(page < 100, "scroll does not end")
		pts, next, err := r.c.ScrollAndOffset(ctx(), &qdrant.ScrollPoints{CollectionName: c.name, Limit: qdrant.PtrOf(uint32(64)), Offset: offset})
		check(err)
		for _, p := range pts {
			expect(!seen[idText(p.GetId())], "scroll gave %s twice", idText(p.GetId()))
			seen[idText(p.GetId())] = true
		}
		r.show("Scroll", fmt.Sprintf("%s, page %d", c.name, page), fmt.Sprintf("%d points, next %v", len(pts), next != nil))
		if next == nil {
			break
		}
		offset = next
	}
	expect(len(seen) == len(c.docs), "scroll saw %d points, want %d", len(seen), len(c.docs))
	// Count with each filter.
	for _, p := range ps {
		n, err := r.c.Count(ctx(), &qdrant.CountPoints{CollectionName: c.name, Filter: p.filter, Exact: qdrant.PtrOf(true)})
		check(err)
		want := 0
		for _, d := range c.docs {
			if p.match(d) {
				want++
			}
		}
		r.show("Count", fmt.Sprintf("%s, filter %s", c.name, p.name), n)
		expect(n == uint64(want), "count %s: %d, want %d", p.name, n, want)
	}
	// Get: payloads and vectors as written.
	ids := []*qdrant.PointId{c.docs[0].id, c.docs[4].id, qdrant.NewIDNum(999999)}
	got, err := r.c.Get(ctx(), &qdrant.GetPoints{CollectionName: c.name, Ids: ids, WithVectors: qdrant.NewWithVectors(true), WithPayload: qdrant.NewWithPayload(true)})
	check(err)
	r.show("Get", fmt.Sprintf("%s, %d ids", c.name, len(ids)), len(got))
	expect(len(got) == 2, "get: %d points, want 2", len(got))
	for _, p := range got {
		d := c.find(idText(p.GetId()))
		vec := p.GetVectors().GetVector().GetDense().GetData()
		expect(len(vec) == c.dim, "get %s: vector of %d", d.key, len(vec))
		for i := range vec {
			expect(math.Abs(float64(vec[i]-d.vec[i])) < 1e-5, "get %s: vector[%d] %v, want %v", d.key, i, vec[i], d.vec[i])
		}
		expect(p.GetPayload()["lang"].GetStringValue() == d.lang, "get %s: payload %v", d.key, p.GetPayload())
	}
}

// twins drives the gRPC twins of REST's facet, groups, recommend, scroll
// order_by and collection update, each against the brute force.
func (r *run) twins(c *coll, rng *rand.Rand) {
	newQ := func() []float32 {
		q := make([]float32, c.dim)
		for j := range q {
			q[j] = float32(rng.NormFloat64())
		}
		return q
	}
	recent := pred{"year >= 2010", &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewRange("year", &qdrant.Range{Gte: qdrant.PtrOf(2010.0)})}},
		func(d doc) bool { return d.year >= 2010 }}

	// Facet: the counts of lang and of tags (each array value once a point).
	for _, key := range []string{"lang", "tags"} {
		hits, err := r.c.Facet(ctx(), &qdrant.FacetCounts{CollectionName: c.name, Key: key, Filter: recent.filter, Limit: qdrant.PtrOf(uint64(3))})
		check(err)
		counts := map[string]uint64{}
		for _, d := range c.docs {
			if !recent.match(d) {
				continue
			}
			if key == "lang" {
				counts[d.lang]++
			}
			for _, t := range d.tags {
				if key == "tags" {
					counts[t]++
				}
			}
		}
		var want []string
		for v := range counts {
			want = append(want, v)
		}
		sort.Slice(want, func(i, j int) bool {
			if counts[want[i]] != counts[want[j]] {
				return counts[want[i]] > counts[want[j]]
			}
			return want[i] < want[j]
		})
		want = want[:min(3, len(want))]
		var got []string
		for _, h := range hits {
			got = append(got, fmt.Sprintf("%s=%d", h.GetValue().GetStringValue(), h.GetCount()))
		}
		r.show("Facet", fmt.Sprintf("%s, key %s, filter %s, limit 3", c.name, key, recent.name), got)
		expect(len(hits) == len(want), "facet %s: %d hits, want %d", key, len(hits), len(want))
		for i, h := range hits {
			expect(h.GetValue().GetStringValue() == want[i] && h.GetCount() == counts[want[i]], "facet %s: hit %d is %s, want %s=%d", key, i, got[i], want[i], counts[want[i]])
		}
	}

	// Groups by lang: the groups whose best hit is best, each its best hits.
	groups := func(ranked []hit, size, limit int) [][]hit {
		var out [][]hit
		var names []string
		for _, h := range ranked {
			l := c.find(h.key).lang
			i := slices.Index(names, l)
			if i < 0 {
				if len(out) == limit {
					continue
				}
				names, out, i = append(names, l), append(out, nil), len(out)
			}
			if len(out[i]) < size {
				out[i] = append(out[i], h)
			}
		}
		return out
	}
	sameGroups := func(what string, got []*qdrant.PointGroup, want [][]hit) {
		expect(len(got) == len(want), "%s: %d groups, want %d", what, len(got), len(want))
		for i, g := range got {
			expect(g.GetId().GetStringValue() == c.find(want[i][0].key).lang, "%s: group %d is %s, want %s", what, i, g.GetId().GetStringValue(), c.find(want[i][0].key).lang)
			sameHits(fmt.Sprintf("%s group %s", what, g.GetId().GetStringValue()), g.GetHits(), want[i])
		}
	}
	q := newQ()
	all := bruteForce(c, q, preds()[0], len(c.docs))
	sg, err := r.c.GetPointsClient().SearchGroups(ctx(), &qdrant.SearchPointGroups{CollectionName: c.name, Vector: q, GroupBy: "lang", GroupSize: 2, Limit: 3})
	check(err)
	r.show("SearchGroups", c.name+", group_by lang, group_size 2, limit 3", len(sg.GetResult().GetGroups()))
	sameGroups("SearchGroups", sg.GetResult().GetGroups(), groups(all, 2, 3))
	qg, err := r.c.QueryGroups(ctx(), &qdrant.QueryPointGroups{CollectionName: c.name, Query: qdrant.NewQuery(q...), GroupBy: "lang",
		GroupSize: qdrant.PtrOf(uint64(3)), Limit: qdrant.PtrOf(uint64(2)), Filter: recent.filter})
	check(err)
	r.show("QueryGroups", c.name+", group_by lang, group_size 3, limit 2, filter "+recent.name, len(qg))
	sameGroups("QueryGroups", qg, groups(bruteForce(c, q, recent, len(c.docs)), 3, 2))

	// Recommend (average_vector): 2·avg(positive) − avg(negative), the
	// examples left out.
	pos, neg := []doc{c.docs[0], c.docs[1]}, []doc{c.docs[2]}
	rv := make([]float32, c.dim)
	for j := range rv {
		p := (float64(pos[0].vec[j]) + float64(pos[1].vec[j])) / 2
		rv[j] = float32(2*p - float64(neg[0].vec[j]))
	}
	examples := pred{"not an example", nil, func(d doc) bool { return d.key != pos[0].key && d.key != pos[1].key && d.key != neg[0].key }}
	rec, err := r.c.GetPointsClient().Recommend(ctx(), &qdrant.RecommendPoints{CollectionName: c.name, Positive: []*qdrant.PointId{pos[0].id, pos[1].id},
		Negative: []*qdrant.PointId{neg[0].id}, Limit: 6, Strategy: qdrant.RecommendStrategy_AverageVector.Enum()})
	check(err)
	r.show("Recommend", c.name+", 2 positive, 1 negative, limit 6", hitsText(rec.GetResult()))
	sameHits("Recommend", rec.GetResult(), bruteForce(c, rv, examples, 6))
	qr, err := r.c.Query(ctx(), &qdrant.QueryPoints{CollectionName: c.name, Limit: qdrant.PtrOf(uint64(6)),
		Query: qdrant.NewQueryRecommend(&qdrant.RecommendInput{Positive: []*qdrant.VectorInput{qdrant.NewVectorInputID(pos[0].id), qdrant.NewVectorInputID(pos[1].id)},
			Negative: []*qdrant.VectorInput{qdrant.NewVectorInput(neg[0].vec...)}})})
	check(err)
	r.show("Query (recommend)", c.name+", 2 positive ids, 1 negative vector, limit 6", hitsText(qr))
	// The negative came as a vector: only the positive ids are left out.
	sameHits("Query recommend", qr, bruteForce(c, rv, pred{"", nil, func(d doc) bool { return d.key != pos[0].key && d.key != pos[1].key }}, 6))
	rg, err := r.c.GetPointsClient().RecommendGroups(ctx(), &qdrant.RecommendPointGroups{CollectionName: c.name, Positive: []*qdrant.PointId{pos[0].id, pos[1].id},
		Negative: []*qdrant.PointId{neg[0].id}, GroupBy: "lang", GroupSize: 2, Limit: 2})
	check(err)
	r.show("RecommendGroups", c.name+", group_by lang, group_size 2, limit 2", len(rg.GetResult().GetGroups()))
	sameGroups("RecommendGroups", rg.GetResult().GetGroups(), groups(bruteForce(c, rv, examples, len(c.docs)), 2, 2))

	// Scroll in year order, descending, lang en: equal years by id, descending.
	en := preds()[1]
	var want []doc
	for _, d := range c.docs {
		if en.match(d) {
			want = append(want, d)
		}
	}
	sort.SliceStable(want, func(i, j int) bool {
		if want[i].year != want[j].year {
			return want[i].year > want[j].year
		}
		return idLess(want[j].key, want[i].key)
	})
	want = want[:min(12, len(want))]
	pts, err := r.c.Scroll(ctx(), &qdrant.ScrollPoints{CollectionName: c.name, Filter: en.filter, Limit: qdrant.PtrOf(uint32(12)),
		OrderBy: &qdrant.OrderBy{Key: "year", Direction: qdrant.Direction_Desc.Enum()}})
	check(err)
	var got []string
	for _, p := range pts {
		got = append(got, idText(p.GetId()))
	}
	r.show("Scroll (order_by year desc)", c.name+", filter "+en.name+", limit 12", got)
	expect(len(pts) == len(want), "order_by: %d points, want %d", len(pts), len(want))
	for i, p := range pts {
		expect(idText(p.GetId()) == want[i].key, "order_by: point %d is %s, want %s (year %d)", i, idText(p.GetId()), want[i].key, want[i].year)
		expect(p.GetOrderValue().GetInt() == want[i].year, "order_by: order_value of %s", want[i].key)
	}

	// Update: int8 codes on and off online; answers stay the brute force's.
	for _, on := range []bool{true, false} {
		diff := qdrant.NewQuantizationDiffDisabled()
		if on {
			diff = qdrant.NewQuantizationDiffScalar(&qdrant.ScalarQuantization{Type: qdrant.QuantizationType_Int8})
		}
		check(r.c.UpdateCollection(ctx(), &qdrant.UpdateCollection{CollectionName: c.name, QuantizationConfig: diff,
			OptimizersConfig: &qdrant.OptimizersConfigDiff{IndexingThreshold: qdrant.PtrOf(uint64(0))}}))
		info, err := r.c.GetCollectionInfo(ctx(), c.name)
		check(err)
		isInt8 := info.GetConfig().GetQuantizationConfig().GetScalar().GetType() == qdrant.QuantizationType_Int8
		r.show("UpdateCollection", fmt.Sprintf("%s, int8 %v", c.name, on), fmt.Sprintf("int8 %v", isInt8))
		expect(isInt8 == on, "after UpdateCollection int8 %v the collection says int8 %v", on, isInt8)
		q := newQ()
		res, err := r.c.Query(ctx(), &qdrant.QueryPoints{CollectionName: c.name, Query: qdrant.NewQuery(q...), Limit: qdrant.PtrOf(uint64(10))})
		check(err)
		sameHits(fmt.Sprintf("query after int8 %v", on), res, bruteForce(c, q, preds()[0], 10))
	}
	err = r.c.UpdateCollection(ctx(), &qdrant.UpdateCollection{CollectionName: c.name, VectorsConfig: &qdrant.VectorsConfigDiff{
		Config: &qdrant.VectorsConfigDiff_Params{Params: &qdrant.VectorParamsDiff{OnDisk: qdrant.PtrOf(true)}}}})
	r.refused("UpdateCollection (on_disk)", codes.InvalidArgument, err)
}

func (c *coll) find(key string) doc {
	for _, d := range c.docs {
		if d.key == key {
			return d
		}
	}
	fail("%s: no point %s was written", c.name, key)
	return doc{}
}

func hitsText(hs []*qdrant.ScoredPoint) string {
	var b strings.Builder
	for i, h := range hs {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s:%.4f", idText(h.GetId()), h.GetScore())
	}
	return b.String()
}

// refused checks a call fails with the code, and prints Qdrant's message.
func (r *run) refused(name string, want codes.Code, err error) {
	st, _ := status.FromError(err)
	r.show(name, "", fmt.Sprintf("refused %s: %s", st.Code(), st.Message()))
	expect(err != nil && st.Code() == want, "%s: %v, want %s", name, err, want)
}

func (r *run) badInput(c *coll) {
	_, err := r.c.Query(ctx(), &qdrant.QueryPoints{CollectionName: c.name, Query: qdrant.NewQuery(1, 2, 3)})
	r.refused("Query (wrong size)", codes.InvalidArgument, err)
	_, err = r.c.Query(ctx(), &qdrant.QueryPoints{CollectionName: "go_compat_nope", Query: qdrant.NewQuery(1, 2, 3)})
	r.refused("Query (unknown collection)", codes.NotFound, err)
	_, err = r.c.Count(ctx(), &qdrant.CountPoints{CollectionName: c.name, Filter: &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewRange("year", &qdrant.Range{})}}})
	r.refused("Count (range without bounds)", codes.InvalidArgument, err)
	_, err = r.c.Query(ctx(), &qdrant.QueryPoints{CollectionName: c.name, Query: qdrant.NewQuery(make([]float32, c.dim)...),
		Filter: &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewHasVector("v")}}})
	r.refused("Query (has_vector filter)", codes.InvalidArgument, err)
	n, err := r.c.Count(ctx(), &qdrant.CountPoints{CollectionName: c.name})
	check(err)
	expect(n == uint64(len(c.docs)), "bad input changed the collection: %d points", n)
}

// dev posts a router dev fault endpoint.
func (r *run) dev(shard string, replica int, action string) {
	path := fmt.Sprintf("%s/dev/replicas/%s/%d/%s", r.url, shard, replica, action)
	res, err := http.Post(path, "application/json", nil)
	check(err)
	res.Body.Close()
	expect(res.StatusCode == http.StatusOK, "%s: %s", path, res.Status)
	r.show("POST /dev/replicas/"+shard+"/"+strconv.Itoa(replica)+"/"+action, "", res.Status)
}

// queryTrailer queries through the client's raw Points stub, to read the
// trailer a partial answer carries.
func (r *run) queryTrailer(c *coll, q []float32) ([]*qdrant.ScoredPoint, metadata.MD) {
	var tr metadata.MD
	res, err := r.c.GetPointsClient().Query(ctx(), &qdrant.QueryPoints{CollectionName: c.name, Query: qdrant.NewQuery(q...),
		Limit: qdrant.PtrOf(uint64(10))}, grpc.Trailer(&tr))
	check(err)
	return res.GetResult(), tr
}

func (r *run) faults(c *coll, rng *rand.Rand) {
	shards := []string{"shard-0", "shard-1", "shard-2"}
	q := make([]float32, c.dim)
	for j := range q {
		q[j] = float32(rng.NormFloat64())
	}
	want := bruteForce(c, q, preds()[0], 10)
	// A replica of every shard blackholed: answers stay complete.
	for _, s := range shards {
		r.dev(s, 0, "blackhole")
	}
	for i := range 5 {
		res, tr := r.queryTrailer(c, q)
		r.show("Query (replica 0 of every shard blackholed)", i, fmt.Sprintf("%s; x-trawl-degraded %v", hitsText(res), tr.Get("x-trawl-degraded")))
		expect(slices.Equal(tr.Get("x-trawl-degraded"), []string{"false"}), "blackholed replicas made the answer degraded: %v", tr)
		sameHits("query with replicas blackholed", res, want)
	}
	for _, s := range shards {
		r.dev(s, 0, "restore")
	}
	// A whole shard stopped: answers come from the others, marked.
	for rep := range 3 {
		r.dev("shard-1", rep, "stop")
	}
	res, tr := r.queryTrailer(c, q)
	r.show("Query (every replica of shard-1 stopped)", "", fmt.Sprintf("%s; x-trawl-degraded %v, x-trawl-unavailable-shards %v",
		hitsText(res), tr.Get("x-trawl-degraded"), tr.Get("x-trawl-unavailable-shards")))
	expect(slices.Equal(tr.Get("x-trawl-degraded"), []string{"true"}), "a stopped shard's answer is not marked degraded: %v", tr)
	expect(len(tr.Get("x-trawl-unavailable-shards")) == 1 && strings.HasPrefix(tr.Get("x-trawl-unavailable-shards")[0], "shard-1="),
		"unavailable shards: %v", tr.Get("x-trawl-unavailable-shards"))
	// What it gives is the brute force of the points it could see: each
	// score right, in order.
	for i, h := range res {
		d := c.find(idText(h.GetId()))
		expect(math.Abs(float64(h.GetScore())-score(c.metric, q, d.vec)) < 1e-4, "degraded hit %d score", i)
		if i > 0 {
			expect(h.GetScore() <= res[i-1].GetScore(), "degraded hits out of order")
		}
	}
	for rep := range 3 {
		r.dev("shard-1", rep, "restore")
	}
	// Back to complete once the shard serves again.
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, tr := r.queryTrailer(c, q)
		if slices.Equal(tr.Get("x-trawl-degraded"), []string{"false"}) {
			r.show("Query (shard-1 restored)", "", hitsText(res))
			sameHits("query after restore", res, want)
			return
		}
		expect(time.Now().Before(deadline), "still degraded 30 s after the restore: %v", tr)
		time.Sleep(200 * time.Millisecond)
	}
}

func (r *run) deleteByFilter(c *coll) {
	p := preds()[1] // lang = en
	_, err := r.c.Delete(ctx(), &qdrant.DeletePoints{CollectionName: c.name, Wait: qdrant.PtrOf(true), Points: qdrant.NewPointsSelectorFilter(p.filter)})
	check(err)
	r.show("Delete", c.name+", filter "+p.name, "ok")
	var kept []doc
	for _, d := range c.docs {
		if !p.match(d) {
			kept = append(kept, d)
		}
	}
	c.docs = kept
	n, err := r.c.Count(ctx(), &qdrant.CountPoints{CollectionName: c.name})
	check(err)
	r.show("Count", c.name, n)
	expect(n == uint64(len(kept)), "after delete by filter: %d points, want %d", n, len(kept))
	en, err := r.c.Count(ctx(), &qdrant.CountPoints{CollectionName: c.name, Filter: p.filter})
	check(err)
	expect(en == 0, "after delete by filter: %d points still match", en)
}

// bench measures n queries of collection through gRPC (the client's Query)
// and through REST (POST /collections/{c}/points/query, JSON), the same
// random queries, interleaved, and prints each side's p50 and p90.
func (r *run) bench(collection string, n int) {
	info, err := r.c.GetCollectionInfo(ctx(), collection)
	check(err)
	dim := int(info.GetConfig().GetParams().GetVectorsConfig().GetParams().GetSize())
	rng := rand.New(rand.NewPCG(3, 5))
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	var g, h []time.Duration
	for i := range n + 20 {
		q := make([]float32, dim)
		for j := range q {
			q[j] = float32(rng.NormFloat64())
		}
		body, err := json.Marshal(map[string]any{"query": q, "limit": 10})
		check(err)
		t0 := time.Now()
		res, err := r.c.Query(ctx(), &qdrant.QueryPoints{CollectionName: collection, Query: qdrant.NewQuery(q...), Limit: qdrant.PtrOf(uint64(10))})
		dg := time.Since(t0)
		check(err)
		expect(len(res) == 10, "grpc: %d hits", len(res))
		t0 = time.Now()
		// The same deadline as the gRPC side's (ctx: 5 s).
		hr, err := hc.Post(r.url+"/collections/"+collection+"/points/query?deadline_ms=5000", "application/json", bytes.NewReader(body))
		check(err)
		var out struct {
			Result struct {
				Points []json.RawMessage `json:"points"`
			} `json:"result"`
		}
		err = json.NewDecoder(hr.Body).Decode(&out)
		hr.Body.Close()
		dh := time.Since(t0)
		check(err)
		expect(hr.StatusCode == http.StatusOK && len(out.Result.Points) == 10, "rest: %s, %d hits", hr.Status, len(out.Result.Points))
		if i >= 20 { // warm-up
			g, h = append(g, dg), append(h, dh)
		}
	}
	pct := func(ds []time.Duration, p float64) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[int(p*float64(len(s)-1))]
	}
	fmt.Printf("bench: %d queries of %s (%d-D, limit 10), interleaved, client-measured\n", n, collection, dim)
	fmt.Printf("  gRPC (go-client Query): p50 %v  p90 %v\n", pct(g, 0.5), pct(g, 0.9))
	fmt.Printf("  REST (points/query):    p50 %v  p90 %v\n", pct(h, 0.5), pct(h, 0.9))
	fmt.Printf("  gRPC/REST p50 ratio: %.2f\n", float64(pct(g, 0.5))/float64(pct(h, 0.5)))
}

// sparse drives a collection with an idf sparse vector beside the dense
// one over gRPC: points with named vectors, a query using the sparse
// vector checked against a brute force with the collection's idf, and a
// point read back with its named vectors.
func (r *run) sparse() {
	const name = "go_compat_sparse"
	if ok, err := r.c.CollectionExists(ctx(), name); err == nil && ok {
		check(r.c.DeleteCollection(ctx(), name))
	}
	check(r.c.CreateCollection(ctx(), &qdrant.CreateCollection{CollectionName: name,
		VectorsConfig:       qdrant.NewVectorsConfig(&qdrant.VectorParams{Size: 2, Distance: qdrant.Distance_Dot}),
		SparseVectorsConfig: qdrant.NewSparseVectorsConfig(map[string]*qdrant.SparseVectorParams{"bm": {Modifier: qdrant.Modifier_Idf.Enum()}})}))
	r.show("CreateCollection", name+", size 2, Dot, sparse bm (idf)", "ok")
	type sdoc struct {
		indices []uint32
		values  []float32
	}
	docs := map[uint64]sdoc{}
	var pts []*qdrant.PointStruct
	for i := uint64(1); i <= 30; i++ {
		d := sdoc{indices: []uint32{uint32(i % 5), uint32(10 + i%3)}, values: []float32{float32(i%4 + 1), 0.5}}
		vs := map[string]*qdrant.Vector{"": qdrant.NewVectorDense([]float32{1, float32(i)})}
		if i%7 != 0 {
			vs["bm"] = qdrant.NewVectorSparse(d.indices, d.values)
			docs[i] = d
		}
		pts = append(pts, &qdrant.PointStruct{Id: qdrant.NewIDNum(i), Vectors: qdrant.NewVectorsMap(vs)})
	}
	_, err := r.c.Upsert(ctx(), &qdrant.UpsertPoints{CollectionName: name, Wait: qdrant.PtrOf(true), Points: pts})
	check(err)
	r.show("Upsert", name+", 30 points with named vectors", "ok")

	qi, qv := []uint32{2, 11}, []float32{1, 2}
	res, err := r.c.Query(ctx(), &qdrant.QueryPoints{CollectionName: name, Using: qdrant.PtrOf("bm"), Query: qdrant.NewQuerySparse(qi, qv), Limit: qdrant.PtrOf(uint64(5))})
	check(err)
	r.show("Query", "using bm, sparse {2: 1, 11: 2}, limit 5", hitsText(res))
	// The brute force: N counts the points holding a bm vector (Qdrant's
	// indexed vectors of the name), df those holding the term.
	idf := func(t uint32) float32 {
		df := 0
		for _, d := range docs {
			if slices.Contains(d.indices, t) {
				df++
			}
		}
		n := float32(len(docs))
		return float32(math.Log(float64((n-float32(df)+0.5)/(float32(df)+0.5) + 1)))
	}
	type sh struct {
		id    uint64
		score float32
	}
	var want []sh
	for id, d := range docs {
		var s float32
		shared := false
		for j, t := range qi {
			if k := slices.Index(d.indices, t); k >= 0 {
				s += qv[j] * idf(t) * d.values[k]
				shared = true
			}
		}
		if shared {
			want = append(want, sh{id, s})
		}
	}
	sort.Slice(want, func(a, b int) bool {
		if want[a].score != want[b].score {
			return want[a].score > want[b].score
		}
		return strconv.FormatUint(want[a].id, 10) < strconv.FormatUint(want[b].id, 10)
	})
	all := want
	want = want[:min(5, len(want))]
	expect(len(res) == len(want), "sparse query: %d hits, want %d", len(res), len(want))
	for i, h := range res {
		expect(math.Abs(float64(h.GetScore()-want[i].score)) <= 1e-5*math.Abs(float64(want[i].score)),
			"sparse query hit %d: score %v, want %v", i, h.GetScore(), want[i].score)
	}
	// Hybrid: the dense prefetch (dot with [0, 1]: the highest ids first)
	// and the sparse one, 6 each, fused by RRF (k = 2, positions from 0),
	// against the fusion of the two brute-force lists.
	hres, err := r.c.Query(ctx(), &qdrant.QueryPoints{CollectionName: name, Query: qdrant.NewQueryFusion(qdrant.Fusion_RRF),
		Prefetch: []*qdrant.PrefetchQuery{{Query: qdrant.NewQuery(0, 1), Limit: qdrant.PtrOf(uint64(6))},
			{Query: qdrant.NewQuerySparse(qi, qv), Using: qdrant.PtrOf("bm"), Limit: qdrant.PtrOf(uint64(6))}},
		Limit: qdrant.PtrOf(uint64(5))})
	check(err)
	r.show("Query", "prefetch [dense [0 1] limit 6, sparse bm limit 6], fusion RRF, limit 5", hitsText(hres))
	fused := map[string]float64{}
	for pos := range 6 {
		fused[strconv.Itoa(30-pos)] += float64(float32(1) / float32(pos+2))
	}
	for pos, h := range all[:min(6, len(all))] {
		fused[strconv.FormatUint(h.id, 10)] += float64(float32(1) / float32(pos+2))
	}
	var hwant []hit
	for k, sc := range fused {
		hwant = append(hwant, hit{k, sc})
	}
	sort.Slice(hwant, func(i, j int) bool {
		if hwant[i].score != hwant[j].score {
			return hwant[i].score > hwant[j].score
		}
		return hwant[i].key < hwant[j].key // the router breaks ties by id as text
	})
	sameHits("hybrid query: dense + sparse prefetch, rrf", hres, hwant[:min(5, len(hwant))])
	got, err := r.c.Get(ctx(), &qdrant.GetPoints{CollectionName: name, Ids: []*qdrant.PointId{qdrant.NewIDNum(1)}, WithVectors: qdrant.NewWithVectors(true)})
	check(err)
	named := got[0].GetVectors().GetVectors().GetVectors()
	r.show("Get", "1 with vectors", fmt.Sprintf("dense %v, bm %v", named[""].GetDense().GetData(), named["bm"].GetSparse().GetIndices()))
	expect(slices.Equal(named["bm"].GetSparse().GetIndices(), docs[1].indices), "point 1's sparse vector read back")
	check(r.c.DeleteCollection(ctx(), name))
	r.show("DeleteCollection", name, "ok")
}
