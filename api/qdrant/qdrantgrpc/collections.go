package qdrantgrpc

import (
	"context"
	"time"

	"github.com/trawl-search/trawl/api/apikey"
	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/vector"
)

// collectionsService is Qdrant's Collections service: the catalog calls
// (REST's /collections routes).
type collectionsService struct {
	pb.UnimplementedCollectionsServer
	s *server
}

// List is every collection of the catalog the key may read, by name,
// those still being created too.
func (c *collectionsService) List(ctx context.Context, _ *pb.ListCollectionsRequest) (*pb.ListCollectionsResponse, error) {
	colls, err := c.s.cfg.Coordinator.Collections(ctx)
	if err != nil {
		return nil, err
	}
	out := &pb.ListCollectionsResponse{Collections: make([]*pb.CollectionDescription, 0, len(colls))}
	for _, co := range colls {
		if c.s.readable(ctx, co.Name) {
			out.Collections = append(out.Collections, &pb.CollectionDescription{Name: co.Name})
		}
	}
	out.Time = elapsed(ctx)
	return out, nil
}

// CollectionExists is true for a collection or an alias of one.
func (c *collectionsService) CollectionExists(ctx context.Context, r *pb.CollectionExistsRequest) (*pb.CollectionExistsResponse, error) {
	if err := c.s.permit(ctx, r.GetCollectionName(), apikey.Read); err != nil {
		return nil, err
	}
	ok, err := qdrantx.Exists(ctx, c.s.cfg.Coordinator, r.GetCollectionName())
	if err != nil {
		return nil, err
	}
	return &pb.CollectionExistsResponse{Result: &pb.CollectionExists{Exists: ok}, Time: elapsed(ctx)}, nil
}

// Get describes a collection (a name or an alias) in Qdrant's terms, as
// REST's GET /collections/{name}: points_count and each payload index's
// points from count fan-outs (status Yellow when one is degraded, and the
// trailer says so); a collection still being created is Yellow without a
// fan-out.
func (c *collectionsService) Get(ctx context.Context, r *pb.GetCollectionInfoRequest) (*pb.GetCollectionInfoResponse, error) {
	name := r.GetCollectionName()
	if err := c.s.permit(ctx, name, apikey.Read); err != nil {
		return nil, err
	}
	b, err := c.s.resolveBudget(ctx, nil)
	if err != nil {
		return nil, err
	}
	partial, err := allowPartial(ctx)
	if err != nil {
		return nil, err
	}
	coll, err := c.s.cfg.Coordinator.Collection(ctx, name)
	switch coordinator.CodeOf(err) {
	case coordinator.CodeCollectionNotFound:
		return nil, qdrantx.NotFoundCollection(name)
	case coordinator.CodeUnavailable:
		if coll.Name == "" {
			return nil, err
		}
		info := c.describe(coll)
		info.Status = pb.CollectionStatus_Yellow
		if coll.Restoring {
			info.Status = pb.CollectionStatus_Grey // as REST's: being restored
		}
		for f, t := range coll.PayloadSchema {
			info.PayloadSchema[f] = &pb.PayloadSchemaInfo{DataType: schemaType(t), Params: schemaParams(t), Points: new(uint64)}
		}
		return &pb.GetCollectionInfoResponse{Result: info, Time: elapsed(ctx)}, nil
	}
	if err != nil {
		return nil, err
	}
	info := c.describe(coll)
	permit, err := c.s.admit(ctx, 1, b.Deadline)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	counts, sum, _, err := qdrantx.CountAll(ctx, c.s.cfg.Coordinator, coll, b, partial)
	permit.Done(time.Since(start), wire.Late(sum))
	if sum.ShardsTotal > 0 {
		setVerdict(ctx, sum)
	}
	if err != nil {
		return nil, err
	}
	if sum.Degraded() {
		info.Status = pb.CollectionStatus_Yellow
	}
	info.PointsCount = &counts.Total
	for f, t := range coll.PayloadSchema {
		n := counts.Fields[f]
		info.PayloadSchema[f] = &pb.PayloadSchemaInfo{DataType: schemaType(t), Params: schemaParams(t), Points: &n}
	}
	return &pb.GetCollectionInfoResponse{Result: info, Time: elapsed(ctx)}, nil
}

// distanceOf is a trawl metric as Qdrant's Distance.
func distanceOf(m vector.Metric) pb.Distance {
	switch m {
	case vector.DotProduct:
		return pb.Distance_Dot
	case vector.Euclidean:
		return pb.Distance_Euclid
	}
	return pb.Distance_Cosine
}

// describe is what Get says of a collection without reading the shards.
// trawl has no HNSW graph, segments or optimizer: m 0 is Qdrant's "no
// graph" (every search a scan, re-scored in float32), segments are the
// shards.
func (c *collectionsService) describe(coll coordinator.Collection) *pb.CollectionInfo {
	shards, replicas := c.s.cfg.Coordinator.Shape()
	dist := distanceOf(coll.Settings.Metric)
	params := &pb.CollectionParams{
		ShardNumber: uint32(shards),
		VectorsConfig: &pb.VectorsConfig{Config: &pb.VectorsConfig_Params{Params: &pb.VectorParams{Size: uint64(coll.Settings.Dim), Distance: dist,
			OnDisk: ptr(coll.Settings.Float32 == catalog.Float32OnDisk)}}},
		ReplicationFactor:      ptr(uint32(replicas)),
		WriteConsistencyFactor: ptr(uint32(1)),
	}
	if len(coll.Settings.Named) > 0 {
		m := make(map[string]*pb.VectorParams, len(coll.Settings.Named))
		for name, d := range coll.Settings.Named {
			vp := &pb.VectorParams{Size: uint64(d.Dim), Distance: distanceOf(d.Metric), OnDisk: ptr(false)}
			if d.Quantization == catalog.QuantInt8 {
				vp.QuantizationConfig = &pb.QuantizationConfig{Quantization: &pb.QuantizationConfig_Scalar{Scalar: &pb.ScalarQuantization{Type: pb.QuantizationType_Int8}}}
			}
			m[name] = vp
		}
		params.VectorsConfig = &pb.VectorsConfig{Config: &pb.VectorsConfig_ParamsMap{ParamsMap: &pb.VectorParamsMap{Map: m}}}
	}
	info := &pb.CollectionInfo{
		Status: pb.CollectionStatus_Green, OptimizerStatus: &pb.OptimizerStatus{Ok: true}, SegmentsCount: uint64(shards),
		Config: &pb.CollectionConfig{
			Params:          params,
			HnswConfig:      &pb.HnswConfigDiff{M: ptr(uint64(0))},
			OptimizerConfig: &pb.OptimizersConfigDiff{},
			WalConfig:       &pb.WalConfigDiff{},
		},
		PayloadSchema: map[string]*pb.PayloadSchemaInfo{},
	}
	if coll.Settings.Quantization == catalog.QuantInt8 {
		info.Config.QuantizationConfig = &pb.QuantizationConfig{Quantization: &pb.QuantizationConfig_Scalar{Scalar: &pb.ScalarQuantization{Type: pb.QuantizationType_Int8}}}
	}
	return info
}

// schemaType names a declared payload index type as Qdrant's enum.
func schemaType(t string) pb.PayloadSchemaType {
	switch filter.SchemaType(t) {
	case "keyword":
		return pb.PayloadSchemaType_Keyword
	case "integer":
		return pb.PayloadSchemaType_Integer
	case "float":
		return pb.PayloadSchemaType_Float
	case "geo":
		return pb.PayloadSchemaType_Geo
	case "text":
		return pb.PayloadSchemaType_Text
	case "bool":
		return pb.PayloadSchemaType_Bool
	case "datetime":
		return pb.PayloadSchemaType_Datetime
	case "uuid":
		return pb.PayloadSchemaType_Uuid
	}
	return pb.PayloadSchemaType_UnknownType
}

// schemaParams is a text index declaration's params as Qdrant's
// TextIndexParams; nil for other types, whose params trawl does not keep.
func schemaParams(schema string) *pb.PayloadIndexParams {
	t, ok := filter.TextIndexOf(schema)
	if !ok {
		return nil
	}
	p := &pb.TextIndexParams{Tokenizer: pb.TokenizerType_Word, Lowercase: ptr(t.Lowercase)}
	if t.Tokenizer == filter.TokenizerWhitespace {
		p.Tokenizer = pb.TokenizerType_Whitespace
	}
	if t.MinTokenLen > 0 {
		p.MinTokenLen = ptr(uint64(t.MinTokenLen))
	}
	if t.MaxTokenLen > 0 {
		p.MaxTokenLen = ptr(uint64(t.MaxTokenLen))
	}
	return &pb.PayloadIndexParams{IndexParams: &pb.PayloadIndexParams_TextIndexParams{TextIndexParams: p}}
}

func ptr[T any](v T) *T { return &v }

// Create creates a collection, or finds it created with these settings
// (both true); other settings are AlreadyExists in Qdrant's words.
func (c *collectionsService) Create(ctx context.Context, r *pb.CreateCollection) (*pb.CollectionOperationResponse, error) {
	name := r.GetCollectionName()
	if err := c.s.permit(ctx, name, apikey.Write); err != nil {
		return nil, err
	}
	s, err := decodeCreate(r)
	if err != nil {
		return nil, err
	}
	if err := qdrantx.Create(ctx, c.s.cfg.Coordinator, name, s); err != nil {
		return nil, err
	}
	return &pb.CollectionOperationResponse{Result: true, Time: elapsed(ctx)}, nil
}

// Delete drops a collection and the aliases that point at it: true, or
// false when there was none.
func (c *collectionsService) Delete(ctx context.Context, r *pb.DeleteCollection) (*pb.CollectionOperationResponse, error) {
	name := r.GetCollectionName()
	if err := c.s.permit(ctx, name, apikey.Write); err != nil {
		return nil, err
	}
	dropped, err := qdrantx.Drop(ctx, c.s.cfg.Coordinator, name)
	if err != nil {
		return nil, err
	}
	return &pb.CollectionOperationResponse{Result: dropped, Time: elapsed(ctx)}, nil
}

// UpdateAliases applies alias actions in order, each checked (and the
// key's write on every name they touch) before the first is applied.
func (c *collectionsService) UpdateAliases(ctx context.Context, r *pb.ChangeAliases) (*pb.CollectionOperationResponse, error) {
	changes, err := decodeAliases(r)
	if err != nil {
		return nil, err
	}
	for _, ch := range changes {
		for _, n := range ch.Names() {
			if err := c.s.permit(ctx, n, apikey.Write); err != nil {
				return nil, err
			}
		}
	}
	if err := qdrantx.ApplyAliases(ctx, c.s.cfg.Coordinator, changes); err != nil {
		return nil, err
	}
	return &pb.CollectionOperationResponse{Result: true, Time: elapsed(ctx)}, nil
}

// ListAliases is every alias the key may read.
func (c *collectionsService) ListAliases(ctx context.Context, _ *pb.ListAliasesRequest) (*pb.ListAliasesResponse, error) {
	return c.aliases(ctx, "")
}

// ListCollectionAliases is the aliases of one collection.
func (c *collectionsService) ListCollectionAliases(ctx context.Context, r *pb.ListCollectionAliasesRequest) (*pb.ListAliasesResponse, error) {
	if err := c.s.permit(ctx, r.GetCollectionName(), apikey.Read); err != nil {
		return nil, err
	}
	return c.aliases(ctx, r.GetCollectionName())
}

func (c *collectionsService) aliases(ctx context.Context, of string) (*pb.ListAliasesResponse, error) {
	as, err := qdrantx.ListAliases(ctx, c.s.cfg.Coordinator, of, func(n string) bool { return c.s.readable(ctx, n) })
	if err != nil {
		return nil, err
	}
	out := &pb.ListAliasesResponse{Aliases: make([]*pb.AliasDescription, len(as))}
	for i, a := range as {
		out.Aliases[i] = &pb.AliasDescription{AliasName: a.Alias, CollectionName: a.Collection}
	}
	out.Time = elapsed(ctx)
	return out, nil
}
