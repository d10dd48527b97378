package client

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector/sparsevec"
)

// Query is one search query as a replica takes it.
type Query struct {
	Vector []float32
	K      int
	// ExcludeID is left out of the answer (search by a stored id).
	ExcludeID string
	// Exact skips any approximate scan (int8 codes, an index probe).
	Exact bool
	// Oversample is the int8 scan's candidates per k, NProbe the IVF
	// lists to probe; 0 for the shard's defaults.
	Oversample int
	NProbe     int
	// Filter is a payload filter in its canonical JSON (filter.Filter's
	// MarshalJSON), nil for none: every replica parses the same bytes.
	Filter []byte
	// ScoreThreshold, when set, keeps only hits at least this good.
	ScoreThreshold *float64
	// Payload, when set, returns each hit's payload: all of it, or the
	// listed top-level keys the document has.
	Payload *PayloadSelection
	// WithVector returns each hit's stored vector.
	WithVector bool
	// Sparse, when set, makes this a sparse query (Vector unset).
	Sparse *SparseQuery
	// Using names the named dense vector Vector is a query by ("" for
	// the unnamed one).
	Using string
}

// PayloadSelection is a query's with_payload.
type PayloadSelection struct {
	All  bool
	Keys []string
}

// Hit is one hit of a replica's answer, best first within its list.
type Hit struct {
	ID    string
	Score float32
	// Payload is the hit's payload (or the selected keys), "{}" for a
	// document without one, when asked; else nil.
	Payload []byte
	// Vector is the hit's stored vector when asked; else nil.
	Vector []float32
	// Sparse are the hit's stored sparse vectors when asked; else nil.
	Sparse map[string]sparsevec.Vector
	// Named are the hit's stored named dense vectors when asked; else
	// nil.
	Named map[string][]float32
}

// SearchResult is a replica's answer to a batch.
type SearchResult struct {
	// Hits is each query's exact top-k of the replica's matching
	// documents, in query order.
	Hits [][]Hit
	// Docs is how many documents the replica held when it answered.
	Docs uint64
	// Exact is true when every query was scored in float32 over every
	// matching row.
	Exact bool
}

// Batch is a batch of queries encoded once, for every replica it is sent
// to: a fan-out, its failovers and its hedges share the encoding.
type Batch struct {
	coll    *shardpb.CollectionRef
	queries []Query
	pb      []*shardpb.Query
}

// NewBatch encodes qs for Conn.SearchBatch, on the legacy collection.
func NewBatch(qs []Query) *Batch { return NewBatchIn(Collection{}, qs) }

// NewBatchIn encodes qs, on coll, for Conn.SearchBatch.
func NewBatchIn(coll Collection, qs []Query) *Batch {
	b := &Batch{coll: Scoped{coll: coll}.ref(), queries: qs, pb: make([]*shardpb.Query, len(qs))}
	for i, q := range qs {
		pq := &shardpb.Query{Vector: shard.EncodeVector(q.Vector), K: uint32(q.K), ExcludeId: q.ExcludeID,
			Exact: q.Exact, Oversample: uint32(q.Oversample), Nprobe: uint32(q.NProbe), Filter: q.Filter,
			ScoreThreshold: q.ScoreThreshold, WithVector: q.WithVector, Using: q.Using}
		if p := q.Payload; p != nil {
			pq.WithPayload = &shardpb.PayloadSelector{All: p.All, Keys: p.Keys}
		}
		if sq := q.Sparse; sq != nil {
			pq.Vector = nil
			pq.Sparse = &shardpb.SparseQuery{Name: sq.Name, Indices: sq.Vector.Indices, Values: sq.Vector.Values, Weights: sq.Weights}
		}
		b.pb[i] = pq
	}
	return b
}

// Search runs a batch of queries (one or more) in one RPC; one scan of
// the replica's rows serves them all. ctx must carry the query's
// deadline. minIndex is the last write index the caller acknowledged on
// this shard (0: none); a replica that has not applied it, or is not
// serving, answers an error with NotServing() true.
func (c *Conn) Search(ctx context.Context, qs []Query, minIndex uint64) (SearchResult, error) {
	return c.SearchBatch(ctx, NewBatch(qs), minIndex)
}

// SearchBatch is Search of a batch encoded once (NewBatch); the batch is
// only read, so concurrent calls may share it.
func (c *Conn) SearchBatch(ctx context.Context, b *Batch, minIndex uint64) (SearchResult, error) {
	return c.SearchSlots(ctx, b, minIndex, nil)
}

// SearchSlots is SearchBatch answered from the slots sel names only (a
// collection with a slot map; nil: every row the replica holds). A
// replica that does not hold one of them refuses with a
// *shard.SlotMovedError whose NotServing() is true.
func (c *Conn) SearchSlots(ctx context.Context, b *Batch, minIndex uint64, sel *shardpb.SlotSelection) (SearchResult, error) {
	qs := b.queries
	req := &shardpb.SearchRequest{Queries: b.pb, MinIndex: minIndex, Collection: b.coll, Slots: sel}
	resp, err := c.shard.Search(ctx, req)
	if err != nil {
		return SearchResult{}, shard.AsRead(shard.FromStatus(err))
	}
	if len(resp.GetResults()) != len(qs) {
		return SearchResult{}, status.Errorf(codes.Internal, "replica answered %d results for %d queries", len(resp.GetResults()), len(qs))
	}
	out := SearchResult{Hits: make([][]Hit, len(qs)), Docs: resp.GetDocCount(), Exact: resp.GetExact()}
	for i, l := range resp.GetResults() {
		hs := make([]Hit, len(l.GetHits()))
		for j, h := range l.GetHits() {
			hs[j] = Hit{ID: h.GetId(), Score: h.GetScore()}
			if qs[i].Payload != nil {
				hs[j].Payload = h.GetPayload()
				if len(hs[j].Payload) == 0 {
					hs[j].Payload = []byte("{}")
				}
			}
			if qs[i].WithVector {
				v, err := shard.DecodeVector(h.GetVector())
				if err != nil {
					return SearchResult{}, status.Errorf(codes.Internal, "replica returned a malformed vector for %q: %v", h.GetId(), err)
				}
				hs[j].Vector = v
				hs[j].Sparse = SparseFromPB(h.GetSparse())
				if hs[j].Named, err = NamedFromPB(h.GetNamed()); err != nil {
					return SearchResult{}, status.Errorf(codes.Internal, "replica returned a malformed named vector for %q: %v", h.GetId(), err)
				}
			}
		}
		out.Hits[i] = hs
	}
	return out, nil
}

// GetDocCount is Docs: what fanout reads a shard's coverage from.
func (r SearchResult) GetDocCount() uint64 { return r.Docs }
