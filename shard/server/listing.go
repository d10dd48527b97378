package server

import (
	"context"
	"math"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
)

// readView resolves a read's collection and slot filter once the replica
// has applied minIndex: what every listing RPC starts with.
func (s *Server) readView(ctx context.Context, minIndex uint64, ref *shardpb.CollectionRef, slots *shardpb.SlotSelection) (*collection, func(string) bool, error) {
	if err := s.readable(ctx, minIndex); err != nil {
		return nil, nil, err
	}
	col, err := s.cfg.Collections.resolve(ref)
	if err != nil {
		return nil, nil, err
	}
	keep, err := s.cfg.Collections.slotReadFilter(col, slots)
	if err != nil {
		return nil, nil, err
	}
	return col, keep, nil
}

// readFilterKey parses a listing's filter (nil when empty) and splits its
// payload key, refusing either malformed (InvalidArgument).
func readFilterKey(what string, fb []byte, key string) (*filter.Filter, []string, error) {
	var f *filter.Filter
	if len(fb) > 0 {
		var err error
		if f, err = filter.Parse(fb); err != nil {
			return nil, nil, status.Errorf(codes.InvalidArgument, "%s filter: %v", what, err)
		}
	}
	path := strings.Split(key, ".")
	if slices.Contains(path, "") {
		return nil, nil, status.Errorf(codes.InvalidArgument, "%s key %q: want a dotted payload path without empty segments", what, key)
	}
	return f, path, nil
}

// Facet implements shardpb.ShardServer: every value under the key with
// its count, so the router's sums are exact whatever limit it applies.
func (s *Server) Facet(ctx context.Context, req *shardpb.FacetRequest) (*shardpb.FacetResponse, error) {
	col, keep, err := s.readView(ctx, req.GetMinIndex(), req.GetCollection(), req.GetSlots())
	if err != nil {
		return nil, err
	}
	f, path, err := readFilterKey("facet", req.GetFilter(), req.GetKey())
	if err != nil {
		return nil, err
	}
	fs := col.mem.Facet(store.FacetRequest{Filter: f, Path: path, Keep: keep})
	if err := facetTooLarge(req.GetKey(), fs.Counts, shard.MaxFacetValues, shard.MaxFacetBytes); err != nil {
		return nil, err
	}
	out := &shardpb.FacetResponse{DocCount: uint64(fs.Docs), Counts: make([]*shardpb.FacetCount, 0, len(fs.Counts))}
	for v, n := range fs.Counts {
		fv := &shardpb.FacetValue{}
		switch v := v.(type) {
		case string:
			fv.Value = &shardpb.FacetValue_Keyword{Keyword: v}
		case int64:
			fv.Value = &shardpb.FacetValue_Integer{Integer: v}
		case bool:
			fv.Value = &shardpb.FacetValue_Boolean{Boolean: v}
		}
		out.Counts = append(out.Counts, &shardpb.FacetCount{Value: fv, Count: uint64(n)})
	}
	return out, nil
}

// facetTooLarge refuses a facet answer of more than maxValues values, or
// whose values (a string its bytes, any value 16 bytes of framing) take
// more than maxBytes (shard.MaxFacetValues, shard.MaxFacetBytes).
func facetTooLarge(key string, counts map[store.FacetValue]int, maxValues, maxBytes int) error {
	if len(counts) > maxValues {
		return status.Errorf(codes.InvalidArgument,
			"facet of %q: %d distinct values under the filter on one shard, more than the %d a facet counts exactly; narrow the filter or facet a key of fewer values",
			key, len(counts), maxValues)
	}
	n := 0
	for v := range counts {
		n += 16
		if s, ok := v.(string); ok {
			n += len(s)
		}
	}
	if n > maxBytes {
		return status.Errorf(codes.InvalidArgument,
			"facet of %q: its values under the filter take %d bytes on one shard, more than the %d a facet answer may; narrow the filter or facet a key of shorter values",
			key, n, maxBytes)
	}
	return nil
}

// OrderedScroll implements shardpb.ShardServer.
func (s *Server) OrderedScroll(ctx context.Context, req *shardpb.OrderedScrollRequest) (*shardpb.OrderedScrollResponse, error) {
	if req.GetLimit() < 1 || req.GetLimit() > shard.MaxScrollLimit {
		return nil, status.Errorf(codes.InvalidArgument, "limit is %d, want 1..%d", req.GetLimit(), shard.MaxScrollLimit)
	}
	if math.IsNaN(req.GetStartFrom()) {
		return nil, status.Error(codes.InvalidArgument, "start_from is NaN")
	}
	col, keep, err := s.readView(ctx, req.GetMinIndex(), req.GetCollection(), req.GetSlots())
	if err != nil {
		return nil, err
	}
	f, path, err := readFilterKey("ordered scroll", req.GetFilter(), req.GetKey())
	if err != nil {
		return nil, err
	}
	pr := store.OrderedPageRequest{Filter: f, Path: path, Descending: req.GetDescending(), From: req.GetStartFrom(),
		HasFrom: req.GetHasStartFrom(), Limit: int(req.GetLimit()), WithVector: req.GetWithVector(), Keep: keep}
	if sel := req.GetWithPayload(); sel != nil {
		pr.Payload = &store.PayloadKeys{}
		if !sel.GetAll() {
			pr.Payload.Keys = append([]string{}, sel.GetKeys()...)
		}
	}
	page, err := col.mem.OrderedPage(pr)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "ordered scroll: %v", err)
	}
	out := &shardpb.OrderedScrollResponse{DocCount: uint64(page.Docs), Points: make([]*shardpb.OrderedPoint, len(page.Records))}
	for i, r := range page.Records {
		v := &shardpb.Vector{Id: r.ID, Payload: r.Payload}
		if r.Vector != nil {
			v.Vector = shard.EncodeVector(r.Vector)
		}
		out.Points[i] = &shardpb.OrderedPoint{Point: v, Value: r.Value, Integer: r.Integer}
	}
	return out, nil
}
