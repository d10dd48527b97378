package replica

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector"
)

// The property test of issue 36: random interleavings of upserts,
// payload edits (by ids and by filter), vector updates, deletes and
// batches of them over two collections of a three-replica group, each
// mirrored on a model. After every step every replica holds exactly the
// model's documents (vectors and payloads), and every replica's exact
// search, scroll, count and facet equal the brute force over the model;
// the same after every replica restarts. TRAWL_PROPERTY_STEPS sets the
// number of steps (default 30, seconds under -race; a few hundred for a
// longer run), TRAWL_PROPERTY_SEED the seed (default 1).

// propDoc is a document of the model.
type propDoc struct {
	vec     []float32
	payload map[string]any
}

// propColl is one collection of the run and its model.
type propColl struct {
	name   string
	uid    uint64
	dim    int
	metric vector.Metric
	docs   map[string]propDoc
}

func (c *propColl) clone() map[string]propDoc {
	out := make(map[string]propDoc, len(c.docs))
	for id, d := range c.docs {
		out[id] = propDoc{vec: d.vec, payload: cloneTree(d.payload)}
	}
	return out
}

// cloneTree deep-copies a decoded JSON object.
func cloneTree(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

// decodeJSON decodes a payload as the model holds it (numbers as
// float64); empty is the empty object.
func decodeJSON(t *testing.T, b []byte) map[string]any {
	t.Helper()
	out := map[string]any{}
	if len(b) > 0 {
		require.NoError(t, json.Unmarshal(b, &out), "%s", b)
	}
	return out
}

// propFilters are the filters steps choose from, as the shards take them.
var propFilters = []string{
	`{"must":[{"key":"color","match":{"value":"red"}}]}`,
	`{"must":[{"key":"color","match":{"any":["blue","green"]}}]}`,
	`{"must":[{"key":"n","range":{"gte":5}}]}`,
	`{"must":[{"key":"tags","match":{"value":"go"}}]}`,
	`{"must":[{"is_empty":{"key":"color"}}]}`,
	`{"must":[{"key":"meta.by","match":{"value":"edit"}}]}`,
	`{"should":[{"key":"n","range":{"lt":3}},{"key":"color","match":{"except":["red"]}}]}`,
}

// matches evaluates a filter on the model's document: the filter
// package's own evaluation, which its tests check against Qdrant's
// semantics; this test checks that replicas and reads agree with it.
func matches(t *testing.T, f string, id string, d propDoc) bool {
	t.Helper()
	flt, err := filter.Parse([]byte(f))
	require.NoError(t, err)
	doc, err := filter.DecodePayload(mustJSON(d.payload))
	require.NoError(t, err)
	return flt.MatchPoint(id, doc)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// propRun drives one run.
type propRun struct {
	t     *testing.T
	rng   *rand.Rand
	ms    []*member
	colls []*propColl
	steps int
}

func (r *propRun) vec(dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(r.rng.NormFloat64())
	}
	return v
}

func (r *propRun) payload() map[string]any {
	p := map[string]any{}
	if r.rng.IntN(5) > 0 {
		p["color"] = []string{"red", "green", "blue"}[r.rng.IntN(3)]
	}
	if r.rng.IntN(3) > 0 {
		p["n"] = float64(r.rng.IntN(10))
	}
	if r.rng.IntN(2) == 0 {
		tags := []any{}
		for _, tg := range []string{"go", "rust", "c"} {
			if r.rng.IntN(2) == 0 {
				tags = append(tags, tg)
			}
		}
		p["tags"] = tags
	}
	return cloneTree(p) // as JSON decodes it
}

// existing picks up to n ids the model holds; absent adds an id it does
// not.
func (r *propRun) existing(c *propColl, docs map[string]propDoc, n int) []string {
	ids := slices.Sorted(maps.Keys(docs))
	r.rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	return ids[:min(n, len(ids))]
}

// edit makes one random edit and applies it to docs; ok is false when it
// must be refused (it names an id docs does not hold), docs then
// unusable.
func (r *propRun) edit(c *propColl, docs map[string]propDoc) (e *shardpb.Edit, ok bool) {
	byFilter := r.rng.IntN(2) == 0
	f := propFilters[r.rng.IntN(len(propFilters))]
	ids := r.existing(c, docs, 1+r.rng.IntN(3))
	if r.rng.IntN(12) == 0 || len(ids) == 0 {
		ids = append(ids, "p-absent") // all or nothing: the whole request is refused
	}
	targets := func() ([]string, bool) {
		if byFilter {
			var out []string
			for _, id := range slices.Sorted(maps.Keys(docs)) {
				if matches(r.t, f, id, docs[id]) {
					out = append(out, id)
				}
			}
			return out, true
		}
		for _, id := range ids {
			if _, held := docs[id]; !held {
				return nil, false
			}
		}
		return ids, true
	}
	sel := func(e *shardpb.Edit) *shardpb.Edit {
		if byFilter {
			e.Filter = []byte(f)
		} else {
			e.Ids = ids
		}
		return e
	}
	switch k := r.rng.IntN(8); k {
	case 0, 1: // upsert
		var vs []*shardpb.Vector
		for range 1 + r.rng.IntN(4) {
			id := "p-" + strconv.Itoa(r.rng.IntN(40))
			d := propDoc{vec: r.vec(c.dim), payload: r.payload()}
			vs = append(vs, &shardpb.Vector{Id: id, Vector: shard.EncodeVector(d.vec), Payload: mustJSON(d.payload)})
			docs[id] = d
		}
		return &shardpb.Edit{Kind: shardpb.EditKind_EDIT_KIND_UPSERT, Vectors: vs}, true
	case 2: // set payload, at the top or under meta.by
		p := map[string]any{"color": []string{"red", "green", "blue"}[r.rng.IntN(3)], "n": float64(r.rng.IntN(10))}
		key := ""
		if r.rng.IntN(3) == 0 {
			key, p = "meta.by", map[string]any{"by": "edit", "at": float64(r.steps)}
			// meta.by ends up {"by": "edit", ...}: match meta.by.by would
			// see it; the filters ask meta.by = "edit", which this
			// replaces with an object, so both shapes are exercised.
			if r.rng.IntN(2) == 0 {
				key, p = "meta", map[string]any{"by": "edit"}
			}
		}
		tg, ok := targets()
		if !ok {
			return sel(&shardpb.Edit{Kind: shardpb.EditKind_EDIT_KIND_SET_PAYLOAD, Payload: mustJSON(p), Key: key}), false
		}
		for _, id := range tg {
			d := docs[id]
			obj := d.payload
			if key != "" {
				for _, seg := range strings.Split(key, ".") {
					next, isObj := obj[seg].(map[string]any)
					if !isObj {
						next = map[string]any{}
						obj[seg] = next
					}
					obj = next
				}
			}
			maps.Copy(obj, cloneTree(p))
		}
		return sel(&shardpb.Edit{Kind: shardpb.EditKind_EDIT_KIND_SET_PAYLOAD, Payload: mustJSON(p), Key: key}), true
	case 3: // overwrite payload
		p := r.payload()
		tg, ok := targets()
		for _, id := range tg {
			d := docs[id]
			d.payload = cloneTree(p)
			docs[id] = d
		}
		return sel(&shardpb.Edit{Kind: shardpb.EditKind_EDIT_KIND_OVERWRITE_PAYLOAD, Payload: mustJSON(p)}), ok
	case 4: // delete payload keys
		keys := []string{[]string{"color", "n", "tags", "meta"}[r.rng.IntN(4)], "nope"}
		tg, ok := targets()
		for _, id := range tg {
			for _, k := range keys {
				delete(docs[id].payload, k)
			}
		}
		return sel(&shardpb.Edit{Kind: shardpb.EditKind_EDIT_KIND_DELETE_PAYLOAD, Keys: keys}), ok
	case 5: // clear payload
		tg, ok := targets()
		for _, id := range tg {
			d := docs[id]
			d.payload = map[string]any{}
			docs[id] = d
		}
		return sel(&shardpb.Edit{Kind: shardpb.EditKind_EDIT_KIND_CLEAR_PAYLOAD}), ok
	case 6: // update vectors (by ids only, as Qdrant)
		var vs []*shardpb.Vector
		ok := true
		for _, id := range ids {
			v := r.vec(c.dim)
			vs = append(vs, &shardpb.Vector{Id: id, Vector: shard.EncodeVector(v)})
			d, held := docs[id]
			if !held {
				ok = false
				continue
			}
			d.vec = v
			docs[id] = d
		}
		return &shardpb.Edit{Kind: shardpb.EditKind_EDIT_KIND_UPDATE_VECTORS, Vectors: vs}, ok
	default: // delete by ids (an absent one is no error) or by filter
		tg, _ := targets()
		if !byFilter {
			tg = ids
		}
		for _, id := range tg {
			delete(docs, id)
		}
		return sel(&shardpb.Edit{Kind: shardpb.EditKind_EDIT_KIND_DELETE}), true
	}
}

// step sends one request (one edit, or a batch of 2..4 applied in order
// in one log entry) to a random replica and mirrors it on the model.
func (r *propRun) step() {
	t := r.t
	r.steps++
	c := r.colls[r.rng.IntN(len(r.colls))]
	docs := c.clone()
	n := 1
	if r.rng.IntN(3) == 0 {
		n = 2 + r.rng.IntN(3)
	}
	var edits []*shardpb.Edit
	refused := false
	for range n {
		e, ok := r.edit(c, docs)
		edits = append(edits, e)
		if !ok {
			refused = true
			break // the rest would not change the answer: refused whole
		}
	}
	m := r.ms[r.rng.IntN(len(r.ms))]
	var err error
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err = m.conn.In(client.Collection{Name: c.name, UID: c.uid}).Edit(ctx(t), place, edits)
		var nl *shard.NotLeaderError
		if err == nil || !errors.As(err, &nl) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if refused {
		require.Error(t, err, "step %d: an edit of an absent id is refused", r.steps)
		return
	}
	if status.Code(err) == codes.Unavailable {
		// Leadership moved while it committed (two loaded cores): once a
		// leader serves, the entry is either in the log or gone for
		// good. The leader's documents say which; both are valid.
		leader := waitLeader(t, r.ms)
		held := r.held(leader, c)
		switch {
		case docsEqual(held, docs):
			c.docs = docs
		case docsEqual(held, c.docs):
		default:
			require.Fail(t, "after an unknown outcome the leader holds neither state", "step %d: %v", r.steps, err)
		}
		t.Logf("step %d: outcome unknown (%v); applied: %v", r.steps, err, docsEqual(held, docs))
		return
	}
	require.NoError(t, err, "step %d: %d edits", r.steps, len(edits))
	c.docs = docs
}

// held is what m's store of c holds, once m has applied what its group
// committed.
func (r *propRun) held(m *member, c *propColl) map[string]propDoc {
	t := r.t
	mem, ok := m.rep.Collections.Store(c.name)
	require.True(t, ok)
	out := map[string]propDoc{}
	require.NoError(t, mem.View(func(rows vector.Rows) error {
		for i, id := range rows.IDs {
			rec, _ := mem.Record(id)
			out[id] = propDoc{vec: slices.Clone(rows.Row(i)), payload: decodeJSON(t, rec.Payload)}
		}
		return nil
	}))
	return out
}

func docsEqual(a, b map[string]propDoc) bool {
	if len(a) != len(b) {
		return false
	}
	for id, d := range a {
		e, ok := b[id]
		if !ok || !slices.Equal(d.vec, e.vec) || string(mustJSON(d.payload)) != string(mustJSON(e.payload)) {
			return false
		}
	}
	return true
}

// check compares every replica with the model: its documents, and its
// exact reads.
func (r *propRun) check(what string) {
	t := r.t
	leader := waitLeader(t, r.ms)
	idx := leader.node.AppliedIndex()
	for _, m := range r.ms {
		require.Eventually(t, func() bool { return m.node.AppliedIndex() >= idx && m.node.Serving() }, 20*time.Second, 5*time.Millisecond)
		mc := pbClient(t, m.listen)
		for _, c := range r.colls {
			where := fmt.Sprintf("%s: replica %s, collection %s", what, m.listen, c.name)
			held := r.held(m, c)
			require.Equal(t, slices.Sorted(maps.Keys(c.docs)), slices.Sorted(maps.Keys(held)), "%s: ids", where)
			for id, d := range c.docs {
				require.Equal(t, d.vec, held[id].vec, "%s: vector of %s", where, id)
				require.Equal(t, d.payload, held[id].payload, "%s: payload of %s", where, id)
			}
			r.checkReads(mc, c, idx, where)
		}
	}
}

// checkReads asks a replica for an exact search, a scroll (and its
// count) and a facet under each filter, and compares each with the brute
// force over the model.
func (r *propRun) checkReads(mc shardpb.ShardClient, c *propColl, idx uint64, where string) {
	t := r.t
	for _, f := range append([]string{""}, propFilters[r.rng.IntN(len(propFilters))]) {
		var keep []string
		for _, id := range slices.Sorted(maps.Keys(c.docs)) {
			if f == "" || matches(t, f, id, c.docs[id]) {
				keep = append(keep, id)
			}
		}
		q := r.vec(c.dim)
		res, err := searchUntilServed(t, mc, &shardpb.SearchRequest{Collection: &shardpb.CollectionRef{Name: c.name, Uid: c.uid}, MinIndex: idx,
			Queries: []*shardpb.Query{{Vector: shard.EncodeVector(q), K: 5, Exact: true, Filter: []byte(f)}}})
		require.NoError(t, err, where)
		type hit struct {
			id    string
			score float64
		}
		var want []hit
		for _, id := range keep {
			v := c.docs[id].vec
			var s float64
			for j := range q {
				if c.metric == vector.Euclidean {
					d := float64(q[j]) - float64(v[j])
					s += d * d
				} else {
					s += float64(q[j]) * float64(v[j])
				}
			}
			if c.metric == vector.Euclidean {
				s = -math.Sqrt(s) // higher is better, as a distance's negation
			}
			want = append(want, hit{id, s})
		}
		sort.Slice(want, func(i, j int) bool { return want[i].score > want[j].score })
		want = want[:min(5, len(want))]
		got := res.GetResults()[0].GetHits()
		require.Len(t, got, len(want), "%s: search under %s", where, f)
		for i, h := range want {
			require.Equal(t, h.id, got[i].GetId(), "%s: search under %s, hit %d", where, f, i)
		}

		var page *shardpb.ScrollResponse
		err = untilServed(func() (err error) {
			page, err = mc.Scroll(ctx(t), &shardpb.ScrollRequest{Collection: &shardpb.CollectionRef{Name: c.name, Uid: c.uid}, MinIndex: idx,
				Filter: []byte(f), Limit: 1000})
			return err
		})
		require.NoError(t, err, where)
		var ids []string
		for _, p := range page.GetPoints() {
			ids = append(ids, p.GetId())
		}
		slices.Sort(ids)
		require.Equal(t, keep, ids, "%s: scroll under %s", where, f)
		require.EqualValues(t, len(keep), page.GetCount(), "%s: count under %s", where, f)

		var fr *shardpb.FacetResponse
		err = untilServed(func() (err error) {
			fr, err = mc.Facet(ctx(t), &shardpb.FacetRequest{Collection: &shardpb.CollectionRef{Name: c.name, Uid: c.uid}, MinIndex: idx,
				Filter: []byte(f), Key: "color"})
			return err
		})
		require.NoError(t, err, where)
		wantFacet := map[string]uint64{}
		for _, id := range keep {
			if s, ok := c.docs[id].payload["color"].(string); ok {
				wantFacet[s]++
			}
		}
		gotFacet := map[string]uint64{}
		for _, fc := range fr.GetCounts() {
			gotFacet[fc.GetValue().GetKeyword()] = fc.GetCount()
		}
		require.Equal(t, wantFacet, gotFacet, "%s: facet of color under %s", where, f)
	}
}

// untilServed runs read again while it answers Unavailable (a replica
// briefly not hearing from its leader on a loaded machine), for up to
// 20 s, and returns its last error.
func untilServed(read func() error) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := read()
		if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestEditsPropertyReplicasAndReadsEqualTheModel(t *testing.T) {
	steps, seed := 30, uint64(1)
	if s := os.Getenv("TRAWL_PROPERTY_STEPS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		steps = n
	}
	if s := os.Getenv("TRAWL_PROPERTY_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seed = n
	}
	t.Logf("%d steps, seed %d (TRAWL_PROPERTY_STEPS, TRAWL_PROPERTY_SEED)", steps, seed)
	// The production raft timings: under -race on two shared cores the
	// test timings' short lease loses leaders mid-write.
	ms := groupOf(t, 3, testDim, func(c *Config) { c.HeartbeatTimeout, c.ElectionTimeout, c.MaxLeaderSilence = 0, 0, 0 })
	leader := waitLeader(t, ms)
	r := &propRun{t: t, rng: rand.New(rand.NewPCG(seed, 36)), ms: ms, colls: []*propColl{
		{name: "left", dim: 6, metric: vector.Euclidean, docs: map[string]propDoc{}},
		{name: "right", dim: 4, metric: vector.DotProduct, docs: map[string]propDoc{}},
	}}
	c := pbClient(t, leader.listen)
	for _, pc := range r.colls {
		resp, err := c.ChangeCatalog(ctx(t), createReq(true, pc.name, 0, pc.dim, pc.metric.String(), "", ""))
		require.NoError(t, err)
		pc.uid = resp.GetEntry().GetUid()
	}
	for range steps {
		r.step()
		r.check(fmt.Sprintf("after step %d", r.steps))
	}
	// Every replica restarts: one from a snapshot, the others from their
	// logs; the same documents and answers.
	require.NoError(t, ms[r.rng.IntN(len(ms))].node.Snapshot())
	for _, m := range ms {
		m.stop()
	}
	for _, m := range ms {
		require.NoError(t, m.start())
	}
	r.check("after every replica restarted")
	for range 3 {
		r.step()
		r.check(fmt.Sprintf("after step %d, after the restart", r.steps))
	}
}
