package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/sparsevec"
)

// Query is one validated search query: a vector, or the id of a stored
// document whose vector to search with (left out of the answer).
type Query struct {
	Vector []float32
	LikeID string
	// K is how many hits to return, 1..vector.MaxK.
	K int
	// Exact asks every shard to score every row in float32 (no int8
	// codes, no index probe). Oversample is the int8 scan's candidates
	// per k, 1..32, or 0 for the shard's default.
	Exact      bool
	Oversample int
	// NProbe is how many inverted lists an IVF shard probes, or 0 for the
	// shard's default; flat shards ignore it.
	NProbe int
	// Filter, when set, limits the answer to documents whose payloads
	// match it (evaluated on the shards before scoring).
	Filter *filter.Filter
	// ScoreThreshold, when set, keeps only hits at least this good (at
	// most this distance under l2); the answer may then hold fewer than K.
	ScoreThreshold *float64
	// WithPayload, when set, returns each hit's payload (all of it, or
	// the listed top-level keys).
	WithPayload *PayloadSelection
	// WithVector returns each hit's stored vector.
	WithVector bool
	// Sparse, when set, makes this a query by a named sparse vector
	// (Vector and LikeID unset): exact sparse dot product, higher better,
	// weighed by collection-wide idf when the vector's modifier is idf.
	Sparse *SparseQuery
	// Using names the named dense vector Vector is a query by, "" for the
	// unnamed one (CheckNamedQuery).
	Using string
	// Recommend, when set, makes this a recommendation: the vector is
	// computed from its examples (Vector and LikeID are unset).
	Recommend *Recommend
	// exclude are ids left out of the merged answer (a recommendation's
	// examples): K counts them too until the merge drops them.
	exclude []string
}

// PayloadSelection is a query's with_payload: all of the payload, or
// only the listed top-level keys (those a document has).
type PayloadSelection struct {
	All  bool
	Keys []string
}

// Search is one search request: a single query (path search) or a batch
// (path search_batch), answered by one fan-out.
type Search struct {
	// Collection is what the queries search (Coordinator.Collection).
	Collection Collection
	Path       fanout.Path
	Queries    []Query
	Budget     budget.Budget
	// AllowPartial false refuses a degraded answer.
	AllowPartial bool
	// uncounted leaves the fan-out out of the metrics: it is one stage of
	// a request (a query tree) that counts its answer once.
	uncounted bool
}

// Hit is one merged search hit.
type Hit struct {
	ID    string
	Score float32
	Shard string
	// Payload is the hit's payload JSON (or the selected keys), "{}" for
	// a document without one, when the query asked for it; else nil.
	Payload []byte
	// Vector is the hit's stored vector when the query asked; else nil.
	Vector []float32
	// Sparse are the hit's sparse vectors when the query asked
	// (WithVector); else nil.
	Sparse map[string]sparsevec.Vector
	// Named are the hit's named dense vectors when the query asked
	// (WithVector); else nil.
	Named map[string][]float32
}

// ShardReport says how one shard served a fan-out (?shard_detail=true).
type ShardReport struct {
	Shard string
	// Status is fanout.StatusOK or the missing reason.
	Status     string
	Replica    string
	Latency    time.Duration
	Hedged     bool
	FailedOver bool
}

// Answer is a fan-out's answer: one merged hit list per query, in query
// order, and the scatter_gather summary.
type Answer struct {
	Hits    [][]Hit
	Summary fanout.Summary
	Shards  []ShardReport
	// Exact is true when every answering shard scored every row in
	// float32 for every query (scatter_gather.exact).
	Exact bool
}

// Search resolves like_id queries, fans the queries out to every shard in
// one RPC each, and merges the shards' top-k lists. Its clock starts when
// it is called (after the request was read and decoded), and the like_id
// lookups spend the same budget as the fan-out. When no shard answered, or
// the answer is degraded and AllowPartial is false, it returns a
// CodeUnavailable error together with the Answer, whose Summary is still
// the answer's scatter_gather block.
func (c *Coordinator) Search(ctx context.Context, s Search) (Answer, error) {
	req := fanout.Request{Path: s.Path, Collection: s.Collection.Name, Start: time.Now(), Budget: s.Budget, Prefer: c.prefer,
		DeferReport: s.uncounted}
	// The client leaving does not cut the fan-out short: it is bounded by
	// the deadline anyway, and a cancelled fan-out would count as degraded.
	ctx = context.WithoutCancel(ctx)
	if err := c.unlistedError(s.Collection); err != nil {
		return Answer{}, err
	}
	for i, q := range s.Queries {
		if q.Sparse == nil {
			if err := CheckNamedQuery(s.Collection, q); err != nil {
				return Answer{}, errorf(CodeInvalid, err, "query %d: %v", i, err)
			}
		}
		if q.Recommend != nil {
			if err := checkRecommend(i, q); err != nil {
				return Answer{}, err
			}
		}
	}
	qs, err := c.resolveLikes(ctx, s.Collection, req, s.Queries)
	if err != nil {
		return Answer{}, err
	}
	for i, q := range qs {
		if q.Sparse != nil {
			if err := CheckSparseQuery(s.Collection, *q.Sparse); err != nil {
				return Answer{}, errorf(CodeInvalid, err, "query %d: %v", i, err)
			}
			continue
		}
	}
	stats := c.sparseWeights(ctx, s.Collection, req, qs)
	cqs := make([]client.Query, len(qs))
	for i, q := range qs {
		cqs[i] = client.Query{Vector: q.Vector, K: q.K, ExcludeID: q.LikeID, Exact: q.Exact, Oversample: q.Oversample,
			NProbe: q.NProbe, ScoreThreshold: q.ScoreThreshold, WithVector: q.WithVector, Using: q.Using}
		if sq := q.Sparse; sq != nil {
			cqs[i].Sparse = &client.SparseQuery{Name: sq.Name, Vector: sq.Vector}
			if stats != nil {
				cqs[i].Sparse.Weights = stats.weights[i]
			}
		}
		if !q.Filter.Empty() {
			// The canonical form: every shard parses the same bytes, and
			// a shard groups a batch's queries by them.
			if cqs[i].Filter, err = json.Marshal(s.Collection.shardFilter(q.Filter)); err != nil {
				return Answer{}, fmt.Errorf("query %d: encoding its filter: %w", i, err)
			}
		}
		if w := q.WithPayload; w != nil {
			cqs[i].Payload = &client.PayloadSelection{All: w.All, Keys: w.Keys}
		}
	}
	batch := client.NewBatchIn(s.Collection.ref(), cqs) // encoded once for every replica asked
	results, sum := gatherFreshUnreported(ctx, c, s.Collection, req, func(coll Collection) fanout.Call[*client.Conn, client.SearchResult] {
		return func(ctx context.Context, r *client.Conn) (client.SearchResult, error) {
			m := c.minIndex(r)
			res, err := r.SearchSlots(ctx, batch, m, c.readSlots(coll, r))
			if err == nil {
				c.served(r, m)
			}
			return res, err
		}
	})

	if name, gone := goneFrom(results); gone {
		return Answer{}, c.collectionGone(ctx, s.Collection, name)
	}
	if stats != nil {
		sum = withMissing(sum, results, stats.summary)
	}
	if !s.uncounted {
		c.cluster.Report(req, sum)
	}
	ans := Answer{Summary: sum, Shards: reports(results), Exact: true}
	for _, res := range results {
		if res.Reason == "" && !res.Value.Exact {
			ans.Exact = false
		}
	}
	if err := refuse(sum, s.AllowPartial); err != nil {
		return ans, err
	}
	ans.Hits = make([][]Hit, len(qs))
	for qi, q := range qs {
		per := make([][]client.Hit, len(results))
		scored := make([][]vector.Hit, len(results))
		for i, res := range results {
			if res.Reason == "" {
				per[i] = res.Value.Hits[qi]
				scored[i] = make([]vector.Hit, len(per[i]))
				for j, h := range per[i] {
					scored[i][j] = vector.Hit{ID: h.ID, Score: h.Score}
				}
			}
		}
		refs := QueryMetric(s.Collection.Settings, q).Merge(q.K, scored)
		hits := make([]Hit, len(refs))
		for j, ref := range refs {
			h := per[ref.List][ref.Pos]
			hits[j] = Hit{ID: h.ID, Score: h.Score, Shard: c.shards[ref.List].Name, Payload: h.Payload, Vector: h.Vector, Sparse: h.Sparse,
				Named: h.Named}
		}
		ans.Hits[qi] = dropExamples(q, hits)
	}
	return ans, nil
}

func reports[T any](rs []fanout.Result[T]) []ShardReport {
	out := make([]ShardReport, len(rs))
	for i, r := range rs {
		st := fanout.StatusOK
		if r.Reason != "" {
			st = string(r.Reason)
		}
		out[i] = ShardReport{Shard: r.Shard, Status: st, Replica: r.Replica, Latency: r.Latency,
			Hedged: r.Hedged, FailedOver: r.FailedOver}
	}
	return out
}

// refuse is the answer's error when it may not be given: a shard refused
// it as overloaded, no shard answered, or the caller refused partial
// answers and this one is.
//
// An overloaded shard refused at once because its scan queue could not
// have finished the read in time: a partial answer then is the router's
// overload made the client's problem silently, while a 429 tells it to back
// off and come back complete. So it is refused (CodeOverloaded), unless the
// caller allows partial answers and the deadline is spent anyway (another
// shard took it all): then the partial answer is the best there is.
func refuse(sum fanout.Summary, allowPartial bool) error {
	if name, ok := overloadedShard(sum); ok && (!allowPartial || sum.Elapsed < sum.ShardDeadline) {
		return errorf(CodeOverloaded, nil, "shard %s is overloaded: every replica asked refused the read (RESOURCE_EXHAUSTED); retry shortly (add replicas if this persists)", name)
	}
	switch {
	case sum.ShardsQueried == 0:
		return errorf(CodeUnavailable, nil, "no shard answered (%d of %d unavailable)", len(sum.Unavailable), sum.ShardsTotal)
	case sum.Degraded() && !allowPartial:
		return errorf(CodeUnavailable, nil, "%d of %d shards unavailable and allow_partial is false", len(sum.Unavailable), sum.ShardsTotal)
	}
	return nil
}

// overloadedShard names the first shard missing as overloaded.
func overloadedShard(sum fanout.Summary) (string, bool) {
	for _, name := range sum.Unavailable {
		if sum.ShardErrors[name] == fanout.ReasonOverloaded {
			return name, true
		}
	}
	return "", false
}

// resolveLikes fetches the stored vectors of like_id queries and of
// recommendations' example ids from their home shards, concurrently,
// within the request's shard deadline.
func (c *Coordinator) resolveLikes(ctx context.Context, coll Collection, req fanout.Request, qs []Query) ([]Query, error) {
	out := make([]Query, len(qs))
	copy(out, qs)
	g, gctx := errgroup.WithContext(ctx)
	for i := range out {
		if out[i].Recommend != nil {
			g.Go(func() error { return c.resolveRecommend(gctx, coll, req, &out[i]) })
			continue
		}
		if out[i].LikeID == "" {
			continue
		}
		g.Go(func() error {
			d, err := c.lookup(gctx, coll, req, out[i].LikeID)
			if err != nil {
				return err
			}
			out[i].Vector = d.Vector
			return nil
		})
	}
	return out, g.Wait()
}

// lookup reads one stored document (vector and payload) from its home
// shard, mapping the engine's answer to this package's errors. A home
// that refuses the read SLOT_MOVED (the slot moved since the router read
// its map) is asked again where the catalog's newer map puts the id.
func (c *Coordinator) lookup(ctx context.Context, coll Collection, req fanout.Request, id string) (Document, error) {
	req.Prefer = c.prefer // the replicas known to have applied its min_index first
	home := c.home(coll, id)
	pv, err := c.lookupAt(ctx, coll, req, id, home)
	for range maxRemaps {
		if moved, _ := slotMoved(err); !moved || coll.Slots.IsZero() {
			break
		}
		now, ok := c.remapped(coll, req.ShardDeadline())
		if !ok {
			break
		}
		coll, home = now, now.Slots.Home(id)
		pv, err = c.lookupAt(ctx, coll, req, id, home)
	}
	var nf *shard.CollectionNotFoundError
	if errors.As(err, &nf) {
		return Document{}, c.collectionGone(ctx, coll, home)
	}
	switch status.Code(err) {
	case codes.OK:
		v, err := vector.DecodeLE(pv.GetVector())
		if err != nil {
			return Document{}, errorf(CodeInternal, err, "shard %s returned a malformed vector for %q: %v", home, id, err)
		}
		named, err := client.NamedFromPB(pv.GetNamed())
		if err != nil {
			return Document{}, errorf(CodeInternal, err, "shard %s returned a malformed named vector for %q: %v", home, id, err)
		}
		return Document{ID: id, Vector: v, Payload: pv.GetPayload(), Shard: home, Sparse: client.SparseFromPB(pv.GetSparse()), Named: named}, nil
	case codes.NotFound:
		return Document{}, errorf(CodeNotFound, err, "no vector with id %q", id)
	case codes.Unavailable, codes.DeadlineExceeded:
		return Document{}, errorf(CodeUnavailable, err, "cannot read id %q: its home shard %s is unavailable: %v", id, home, status.Convert(err).Message())
	}
	if moved, _ := slotMoved(err); moved {
		return Document{}, errorf(CodeUnavailable, err, "cannot read id %q: its slot is moving and shard %s no longer answers for it; retry", id, home)
	}
	return Document{}, fmt.Errorf("reading id %q from shard %s: %w", id, home, err)
}

// lookupAt is one read of id from shard home.
func (c *Coordinator) lookupAt(ctx context.Context, coll Collection, req fanout.Request, id, home string) (*shardpb.Vector, error) {
	return fanout.Lookup(ctx, c.cluster, req, home, func(ctx context.Context, r *client.Conn) (*shardpb.Vector, error) {
		m := c.minIndex(r)
		v, err := r.In(coll.ref()).Slots(c.slotSelection(coll, home)).Get(ctx, id, m)
		if err == nil {
			c.served(r, m)
		}
		return v, err
	})
}

// Document is one stored document as GET returns it.
type Document struct {
	ID     string
	Vector []float32
	// Payload is its payload JSON, nil when it has none.
	Payload []byte
	Shard   string
	// Sparse are its sparse vectors, nil when it has none.
	Sparse map[string]sparsevec.Vector
	// Named are its named dense vectors, nil when it has none.
	Named map[string][]float32
}

// Get reads one stored document from its home shard within b's shard
// deadline, whose clock starts now.
func (c *Coordinator) Get(ctx context.Context, coll Collection, id string, b budget.Budget) (Document, error) {
	req := fanout.Request{Start: time.Now(), Budget: b}
	return c.lookup(context.WithoutCancel(ctx), coll, req, id)
}

// MaxRetrieve is the most ids one Retrieve reads.
const MaxRetrieve = 1000

// retrieveConcurrency bounds the lookups one Retrieve runs at once.
const retrieveConcurrency = 16

// Retrieve reads ids from their home shards, concurrently, within b's
// shard deadline (whose clock starts now), in the order given; ids that
// are not stored are left out. An id whose home shard cannot say (no
// replica answered in time) fails the whole read with CodeUnavailable:
// leaving it out would claim it is not stored (field report 000).
//
// Its Summary counts the shards asked (the ids' home shards) as queried;
// it is never degraded, since a read missing a shard is an error.
func (c *Coordinator) Retrieve(ctx context.Context, coll Collection, ids []string, b budget.Budget) (RetrieveAnswer, error) {
	if len(ids) > MaxRetrieve {
		return RetrieveAnswer{}, fmt.Errorf("retrieve of %d ids, want at most %d", len(ids), MaxRetrieve)
	}
	req := fanout.Request{Start: time.Now(), Budget: b}
	ctx = context.WithoutCancel(ctx)
	docs := make([]Document, len(ids))
	found := make([]bool, len(ids))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(retrieveConcurrency)
	for i, id := range ids {
		g.Go(func() error {
			d, err := c.lookup(gctx, coll, req, id)
			if CodeOf(err) == CodeNotFound {
				return nil
			}
			if err != nil {
				return err
			}
			docs[i], found[i] = d, true
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return RetrieveAnswer{}, err
	}
	out := RetrieveAnswer{Docs: make([]Document, 0, len(ids)), Summary: fanout.Summary{
		ShardsTotal: len(c.shards), Unavailable: []string{}, ShardErrors: map[string]fanout.Reason{}, Coverage: 1,
		Deadline: b.Deadline, ShardDeadline: b.Shard}}
	asked := map[string]bool{}
	for i, d := range docs {
		if !found[i] {
			asked[c.home(coll, ids[i])] = true
			continue
		}
		asked[d.Shard] = true // where it was read, under the newest map
		out.Docs = append(out.Docs, d)
	}
	out.Summary.ShardsQueried = len(asked)
	out.Summary.Elapsed = time.Since(req.Start)
	return out, nil
}

// RetrieveAnswer is what Retrieve read.
type RetrieveAnswer struct {
	// Docs are the stored ones of the ids asked, in their order.
	Docs    []Document
	Summary fanout.Summary
}

// Project keeps the part of a stored payload sel asks for: all of it, or
// its listed top-level keys that are there; "{}" for no payload.
func (sel PayloadSelection) Project(p []byte) ([]byte, error) {
	if len(p) == 0 {
		return []byte("{}"), nil
	}
	if sel.All {
		return p, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(p, &obj); err != nil {
		return nil, fmt.Errorf("stored payload does not decode: %w", err)
	}
	out := make(map[string]json.RawMessage, len(sel.Keys))
	for _, k := range sel.Keys {
		if v, ok := obj[k]; ok {
			out[k] = v
		}
	}
	return json.Marshal(out)
}
