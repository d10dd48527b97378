package qdrantgrpc

import (
	"fmt"
	"strings"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/filter"
)

// query is one decoded search or query: trawl's query, the hits to skip
// (offset) and payload keys to drop (exclude).
type query struct {
	q       coordinator.Query
	offset  int
	exclude []string
	// tree, when set, is the query with its prefetches (its root's Query
	// is q).
	tree *coordinator.Stage
}

// decodeCommon fills what search and query share: limit, offset, filter,
// params, payload and vector selection, and threshold.
func decodeCommon(limit, offset uint64, f *pb.Filter, wp *pb.WithPayloadSelector, wv *pb.WithVectorsSelector,
	params *pb.SearchParams, threshold *float32) (query, error) {
	if limit < 1 || limit > wire.MaxK || offset > wire.MaxK || limit+offset > wire.MaxK {
		return query{}, invalidf("limit %d and offset %d: want limit at least 1 and limit + offset at most %d", limit, offset, wire.MaxK)
	}
	out := query{q: coordinator.Query{K: int(limit + offset)}, offset: int(offset)}
	var err error
	if out.q.Filter, err = decodeFilter(f); err != nil {
		return query{}, err
	}
	if out.q.WithPayload, out.exclude, err = decodeWithPayload(wp, false); err != nil {
		return query{}, err
	}
	if out.q.WithVector, err = decodeWithVectors(wv); err != nil {
		return query{}, err
	}
	out.q.Exact = params.GetExact()
	if threshold != nil {
		t := float64(*threshold)
		out.q.ScoreThreshold = &t
	}
	return out, nil
}

// refuseShardKey refuses a shard key selector.
func refuseShardKey(s *pb.ShardKeySelector) error {
	if s != nil {
		return wire.Invalid(qdrantx.ErrShardKey)
	}
	return nil
}

// decodeSearch decodes a legacy SearchPoints. Its limit has no default in
// Qdrant's message (0 is refused, as Qdrant refuses it).
func decodeSearch(r *pb.SearchPoints, sch coordinator.Schema) (query, error) {
	if err := refuseShardKey(r.ShardKeySelector); err != nil {
		return query{}, err
	}
	vsch, using, isDense, err := denseUsing(r.VectorName, sch)
	if err != nil {
		return query{}, wire.Invalid("vector_name: " + strings.TrimPrefix(err.Error(), "using: "))
	}
	sparseName := !isDense && r.VectorName != nil && len(sch.Sparse) > 0 && *r.VectorName != ""
	if r.VectorName != nil && *r.VectorName != "" && !sparseName && !isDense {
		return query{}, invalidf("vector_name: %s (got %q)", qdrantx.ErrNamedVectors, *r.VectorName)
	}
	if r.SparseIndices != nil && !sparseName {
		return query{}, wire.Invalid("sparse_indices: " + qdrantx.ErrSparse)
	}
	out, err := decodeCommon(r.GetLimit(), r.GetOffset(), r.Filter, r.WithPayload, r.WithVectors, r.Params, r.ScoreThreshold)
	if err != nil {
		return query{}, err
	}
	if sparseName {
		// A NamedSparseVector search: vector holds the values,
		// sparse_indices the indices.
		if r.SparseIndices == nil {
			return query{}, invalidf("sparse_indices is missing: vector_name %q names a sparse vector", *r.VectorName)
		}
		out.q.Sparse, err = sparseQueryOf(*r.VectorName, r.SparseIndices.GetData(), r.GetVector(), "vector", sch)
		return out, err
	}
	out.q.Using = using
	if out.q.Vector, err = checkVector(r.GetVector(), "vector", vsch); err != nil {
		return query{}, err
	}
	return out, nil
}

// decodeQuery decodes a QueryPoints: nearest-vector queries, by a vector
// or by a stored point's id, are served.
func decodeQuery(r *pb.QueryPoints, sch coordinator.Schema) (query, error) {
	if _, isFusion, _ := queryFusion(r.Query, "query"); len(r.Prefetch) > 0 || isFusion {
		return decodeQueryTree(r, sch) // query.go
	}
	switch {
	case r.ShardKeySelector != nil:
		return query{}, wire.Invalid(qdrantx.ErrShardKey)
	case r.LookupFrom != nil:
		return query{}, wire.Invalid(qdrantx.ErrLookupFrom)
	}
	vsch, using, isDense, err := denseUsing(r.Using, sch)
	if err != nil && !isSparseQuery(r) {
		return query{}, err
	}
	switch {
	case isDense:
	case r.Using != nil && *r.Using != "" && len(sch.Sparse) == 0:
		return query{}, invalidf("using: %s (got %q)", qdrantx.ErrNamedVectors, *r.Using)
	case r.Using != nil && *r.Using != "":
		if _, ok := sch.Sparse[*r.Using]; !ok {
			return query{}, invalidf("using: %s (got %q; the collection's sparse vectors are %s)", qdrantx.ErrNamedVectors, *r.Using, sparseList(sch))
		}
	}
	limit := uint64(qdrantx.DefaultLimit)
	if r.Limit != nil {
		limit = *r.Limit
	}
	out, err := decodeCommon(limit, r.GetOffset(), r.Filter, r.WithPayload, r.WithVectors, r.Params, r.ScoreThreshold)
	if err != nil {
		return query{}, err
	}
	var in *pb.VectorInput
	switch x := r.GetQuery().GetVariant().(type) {
	case *pb.Query_Nearest:
		in = x.Nearest
	case *pb.Query_Recommend:
		if out.q.Recommend, err = decodeRecommendInput(x.Recommend, sch); err != nil {
			return query{}, err
		}
		return out, nil
	case nil:
		return query{}, wire.Invalid("query is missing: trawl serves nearest-vector queries (a vector or a point id); list points with Scroll")
	default:
		return query{}, invalidf("query %s is not supported: trawl serves nearest-vector queries (a vector or a point id) and recommend", queryKind(x))
	}
	switch x := in.GetVariant().(type) {
	case *pb.VectorInput_Dense:
		out.q.Using = using
		out.q.Vector, err = checkVector(x.Dense.GetData(), "query", vsch)
	case *pb.VectorInput_Id:
		out.q.LikeID, err = decodeID(x.Id, "query.nearest.id")
	case *pb.VectorInput_Sparse:
		if r.Using == nil || *r.Using == "" {
			err = wire.Invalid("query: a sparse query names its sparse vector in using")
			break
		}
		out.q.Sparse, err = sparseQueryOf(*r.Using, x.Sparse.GetIndices(), x.Sparse.GetValues(), "query.nearest.sparse", sch)
	case *pb.VectorInput_MultiDense:
		err = wire.Invalid("query: " + qdrantx.ErrMulti)
	case nil:
		err = wire.Invalid("query.nearest is empty: give a dense vector or a point id")
	default:
		err = wire.Invalid("query: " + errInference)
	}
	if err != nil {
		return query{}, err
	}
	return out, nil
}

// queryKind names a Query variant as Qdrant's API does.
func queryKind(v any) string {
	switch v.(type) {
	case *pb.Query_Recommend:
		return "recommend"
	case *pb.Query_Discover:
		return "discover"
	case *pb.Query_Context:
		return "context"
	case *pb.Query_OrderBy:
		return "order_by"
	case *pb.Query_Fusion:
		return "fusion"
	case *pb.Query_Sample:
		return "sample"
	case *pb.Query_Formula:
		return "formula"
	case *pb.Query_NearestWithMmr:
		return "nearest_with_mmr"
	case *pb.Query_Rrf:
		return "rrf"
	case *pb.Query_RelevanceFeedback:
		return "relevance_feedback"
	}
	return fmt.Sprintf("%T", v)
}

// decodeBatch decodes 1..wire.MaxBatch requests of one collection, each
// by decode; an error names the entry.
func decodeBatch[R interface{ GetCollectionName() string }](rs []R, collection, what string, decode func(R) (query, error)) ([]query, error) {
	if len(rs) < 1 || len(rs) > wire.MaxBatch {
		return nil, invalidf("%s has %d entries, want 1..%d", what, len(rs), wire.MaxBatch)
	}
	out := make([]query, len(rs))
	for i, r := range rs {
		if n := r.GetCollectionName(); n != "" && n != collection {
			return nil, invalidf("%s[%d]: collection_name %q differs from the batch's %q; a batch searches one collection", what, i, n, collection)
		}
		q, err := decode(r)
		if err != nil {
			return nil, invalidf("%s[%d]: %v", what, i, err)
		}
		out[i] = q
	}
	return out, nil
}

// scrollRequest is a decoded ScrollPoints.
type scrollRequest struct {
	s       coordinator.Scroll
	exclude []string
}

func decodeScroll(r *pb.ScrollPoints) (scrollRequest, error) {
	if err := refuseShardKey(r.ShardKeySelector); err != nil {
		return scrollRequest{}, err
	}
	out := scrollRequest{s: coordinator.Scroll{Limit: qdrantx.DefaultLimit}}
	if r.OrderBy != nil {
		if r.Offset != nil {
			return scrollRequest{}, wire.Invalid("offset cannot be used with order_by: page on with order_by.start_from")
		}
		var err error
		if out.s.OrderBy, err = decodeOrderBy(r.OrderBy); err != nil {
			return scrollRequest{}, err
		}
	}
	if r.Limit != nil {
		if *r.Limit < 1 || *r.Limit > coordinator.MaxScrollLimit {
			return scrollRequest{}, invalidf("limit is %d, want 1..%d", *r.Limit, coordinator.MaxScrollLimit)
		}
		out.s.Limit = int(*r.Limit)
	}
	if r.Offset != nil {
		id, err := decodeID(r.Offset, "offset")
		if err != nil {
			return scrollRequest{}, err
		}
		out.s.From, out.s.HasFrom = id, true
	}
	var err error
	if out.s.Filter, err = decodeFilter(r.Filter); err != nil {
		return scrollRequest{}, err
	}
	if out.s.WithPayload, out.exclude, err = decodeWithPayload(r.WithPayload, true); err != nil {
		return scrollRequest{}, err
	}
	if out.s.WithVector, err = decodeWithVectors(r.WithVectors); err != nil {
		return scrollRequest{}, err
	}
	return out, nil
}

func decodeCount(r *pb.CountPoints) (*filter.Filter, error) {
	if err := refuseShardKey(r.ShardKeySelector); err != nil {
		return nil, err
	}
	return decodeFilter(r.Filter) // exact is accepted: trawl's counts are always exact
}

// getRequest is a decoded GetPoints.
type getRequest struct {
	ids        []string
	payload    *coordinator.PayloadSelection
	exclude    []string
	withVector bool
}

func decodeGet(r *pb.GetPoints) (getRequest, error) {
	if err := refuseShardKey(r.ShardKeySelector); err != nil {
		return getRequest{}, err
	}
	var out getRequest
	var err error
	if out.ids, err = decodeIDs(r.GetIds(), "ids", coordinator.MaxRetrieve); err != nil {
		return getRequest{}, err
	}
	if out.payload, out.exclude, err = decodeWithPayload(r.WithPayload, true); err != nil {
		return getRequest{}, err
	}
	if out.withVector, err = decodeWithVectors(r.WithVectors); err != nil {
		return getRequest{}, err
	}
	return out, nil
}

// decodeUpsert decodes an UpsertPoints, all or nothing, into records.
func decodeUpsert(r *pb.UpsertPoints, sch coordinator.Schema) ([]coordinator.Record, error) {
	switch {
	case r.ShardKeySelector != nil:
		return nil, wire.Invalid(qdrantx.ErrShardKey)
	case r.UpdateFilter != nil:
		return nil, wire.Invalid("update_filter is not supported: trawl upserts unconditionally")
	case r.UpdateMode != nil && *r.UpdateMode != pb.UpdateMode_Upsert:
		return nil, invalidf("update_mode %s is not supported: trawl upserts", r.UpdateMode.String())
	case len(r.Points) < 1 || len(r.Points) > qdrantx.MaxUpsert:
		return nil, invalidf("%d points, want 1..%d", len(r.Points), qdrantx.MaxUpsert)
	}
	out := make([]coordinator.Record, len(r.Points))
	seen := make(map[string]int, len(r.Points))
	for i, p := range r.Points {
		where := fmt.Sprintf("points[%d]", i)
		id, err := decodeID(p.GetId(), where+".id")
		if err != nil {
			return nil, err
		}
		if j, dup := seen[id]; dup {
			return nil, invalidf("%s: id %s repeats points[%d]", where, id, j)
		}
		seen[id] = i
		v, sp, named, err := decodePointVectors(p.GetVectors(), where+".vectors", sch, true)
		if err != nil {
			return nil, err
		}
		pl, err := payloadJSON(p.GetPayload(), where+".payload")
		if err != nil {
			return nil, err
		}
		out[i] = coordinator.Record{ID: id, Vector: v, Payload: pl, Sparse: sp, Named: named}
	}
	return out, nil
}

// decodeDelete decodes a DeletePoints: by ids or by a filter with a
// condition.
func decodeDelete(r *pb.DeletePoints) (coordinator.Removal, error) {
	if err := refuseShardKey(r.ShardKeySelector); err != nil {
		return coordinator.Removal{}, err
	}
	var rm coordinator.Removal
	switch x := r.GetPoints().GetPointsSelectorOneOf().(type) {
	case *pb.PointsSelector_Points:
		ids, err := decodeIDs(x.Points.GetIds(), "points", qdrantx.MaxUpsert)
		if err != nil {
			return coordinator.Removal{}, err
		}
		rm.IDs = ids
	case *pb.PointsSelector_Filter:
		f, err := decodeFilter(x.Filter)
		if err != nil {
			return coordinator.Removal{}, err
		}
		if f.Empty() {
			return coordinator.Removal{}, wire.Invalid(qdrantx.ErrEmptyDelete)
		}
		rm.Filter = f
	default:
		return coordinator.Removal{}, wire.Invalid("points is missing: give ids or a filter")
	}
	return rm, nil
}

// decodeCreate reads a CreateCollection as a trawl collection's settings,
// as the REST create does: one unnamed dense float32 vector of size and
// distance, int8 codes under scalar quantization, a flat index. Tuning of
// structures trawl does not have is accepted; what would change an answer
// is refused by name.
func decodeCreate(r *pb.CreateCollection) (catalog.Settings, error) {
	switch {
	case r.ShardingMethod != nil && *r.ShardingMethod != pb.ShardingMethod_Auto:
		return catalog.Settings{}, invalidf("sharding_method %s is not supported: trawl places points by a hash of their id", r.ShardingMethod.String())
	case r.GetStrictModeConfig().GetEnabled():
		return catalog.Settings{}, wire.Invalid("strict_mode_config.enabled is not supported: trawl does not refuse requests by a collection's strict-mode rules")
	case len(r.Metadata) > 0:
		return catalog.Settings{}, wire.Invalid("metadata is not supported: trawl's catalog keeps no metadata for a collection")
	}
	for _, c := range []struct {
		name string
		v    *uint32
	}{{"shard_number", r.ShardNumber}, {"replication_factor", r.ReplicationFactor}, {"write_consistency_factor", r.WriteConsistencyFactor}} {
		if c.v != nil && *c.v < 1 {
			return catalog.Settings{}, invalidf("%s is %d, want at least 1", c.name, *c.v)
		}
	}
	var p *pb.VectorParams
	switch x := r.GetVectorsConfig().GetConfig().(type) {
	case *pb.VectorsConfig_Params:
		p = x.Params
	case *pb.VectorsConfig_ParamsMap:
		m := x.ParamsMap.GetMap()
		if only, ok := m[""]; ok && len(m) == 1 {
			p = only
			break
		}
		if len(m) == 0 {
			return catalog.Settings{}, wire.Invalid("vectors_config.params_map is empty: a trawl collection holds a dense vector; give params {size, distance} or name one")
		}
		named, err := decodeNamedParams(m, r.QuantizationConfig)
		if err != nil {
			return catalog.Settings{}, err
		}
		sparse, err := decodeSparseConfig(r.GetSparseVectorsConfig())
		if err != nil {
			return catalog.Settings{}, err
		}
		return catalog.Settings{Named: named, Sparse: sparse}, nil
	default:
		return catalog.Settings{}, wire.Invalid("vectors_config is missing: a trawl collection holds one dense vector per point; give params {size, distance: Cosine, Dot or Euclid}")
	}
	if p.GetSize() < catalog.MinDim || p.GetSize() > catalog.MaxDim {
		return catalog.Settings{}, invalidf("vectors_config.params.size is %d, want %d..%d", p.GetSize(), catalog.MinDim, catalog.MaxDim)
	}
	d := p.GetDistance()
	if d == pb.Distance_Manhattan {
		return catalog.Settings{}, wire.Invalid("vectors_config.params.distance Manhattan is not supported: trawl scores Cosine, Dot and Euclid")
	}
	metric, ok := qdrantx.Distances[d.String()]
	if !ok {
		return catalog.Settings{}, invalidf("vectors_config.params.distance %s is not a distance: want Cosine, Dot or Euclid", d.String())
	}
	if p.MultivectorConfig != nil {
		return catalog.Settings{}, wire.Invalid("vectors_config.params.multivector_config: " + qdrantx.ErrMulti)
	}
	if p.Datatype != nil && *p.Datatype != pb.Datatype_Default && *p.Datatype != pb.Datatype_Float32 {
		return catalog.Settings{}, invalidf("vectors_config.params.datatype %s is not supported: trawl stores float32 vectors (int8 codes beside them with scalar int8 quantization)", p.Datatype.String())
	}
	s := catalog.Settings{Dim: int(p.GetSize()), Metric: metric, Quantization: catalog.QuantNone, Index: catalog.IndexFlat}
	for _, q := range []struct {
		where string
		cfg   *pb.QuantizationConfig
	}{{"quantization_config", r.QuantizationConfig}, {"vectors_config.params.quantization_config", p.QuantizationConfig}} {
		scalar, err := decodeQuantization(q.cfg, q.where)
		if err != nil {
			return catalog.Settings{}, err
		}
		if scalar {
			s.Quantization = catalog.QuantInt8
		}
	}
	s.Float32 = qdrantx.Float32(p.OnDisk)
	sparse, err := decodeSparseConfig(r.GetSparseVectorsConfig())
	if err != nil {
		return catalog.Settings{}, err
	}
	s.Sparse = sparse
	return s, nil
}

// decodeQuantization reads a QuantizationConfig: scalar int8 is trawl's
// int8 codes; product and binary are refused.
func decodeQuantization(q *pb.QuantizationConfig, where string) (bool, error) {
	switch x := q.GetQuantization().(type) {
	case nil:
		return false, nil
	case *pb.QuantizationConfig_Scalar:
		if x.Scalar.GetType() != pb.QuantizationType_Int8 {
			return false, invalidf("%s.scalar.type is %s, want Int8", where, x.Scalar.GetType().String())
		}
		if qt := x.Scalar.Quantile; qt != nil && (*qt < 0.5 || *qt > 1) {
			return false, invalidf("%s.scalar.quantile is %g, want 0.5..1", where, *qt)
		}
		return true, nil
	case *pb.QuantizationConfig_Product:
		return false, invalidf("%s.product is not supported: trawl quantizes to int8 codes only (scalar Int8)", where)
	case *pb.QuantizationConfig_Binary:
		return false, invalidf("%s.binary is not supported: trawl quantizes to int8 codes only (scalar Int8)", where)
	}
	return false, invalidf("%s is not supported: trawl quantizes to int8 codes only (scalar Int8)", where)
}

// fieldTypes are Qdrant's FieldType names in the payload schema's words.
var fieldTypes = map[pb.FieldType]string{
	pb.FieldType_FieldTypeKeyword: "keyword", pb.FieldType_FieldTypeInteger: "integer", pb.FieldType_FieldTypeFloat: "float",
	pb.FieldType_FieldTypeGeo: "geo", pb.FieldType_FieldTypeText: "text", pb.FieldType_FieldTypeBool: "bool",
	pb.FieldType_FieldTypeDatetime: "datetime", pb.FieldType_FieldTypeUuid: "uuid",
}

// decodeFieldIndex reads a CreateFieldIndexCollection as a field and its
// declared type (the index params tune Qdrant's structures and are
// accepted, but a text index's, which say how match.text tokenizes).
func decodeFieldIndex(r *pb.CreateFieldIndexCollection) (string, string, error) {
	if err := qdrantx.CheckField(r.GetFieldName()); err != nil {
		return "", "", err
	}
	if r.FieldType == nil {
		return "", "", wire.Invalid("Can't auto-detect field type, please specify `field_type` in the request")
	}
	schema, ok := fieldTypes[*r.FieldType]
	if !ok {
		return "", "", invalidf("field_type %d is not a payload schema type", int32(*r.FieldType))
	}
	if err := qdrantx.CheckFieldSchema(schema); err != nil {
		return "", "", err
	}
	if schema == filter.SchemaText {
		t, err := textIndexParams(r.GetFieldIndexParams().GetTextIndexParams())
		if err != nil {
			return "", "", err
		}
		schema = t.Schema()
	}
	return r.GetFieldName(), schema, nil
}

// textIndexParams reads a text index's TextIndexParams (nil: Qdrant's
// defaults) as filter.ParseTextIndex reads its JSON twin, with the same
// refusals.
func textIndexParams(p *pb.TextIndexParams) (filter.TextIndex, error) {
	t := filter.DefaultTextIndex()
	if p == nil {
		return t, nil
	}
	switch p.GetTokenizer() {
	case pb.TokenizerType_Unknown, pb.TokenizerType_Word:
	case pb.TokenizerType_Whitespace:
		t.Tokenizer = filter.TokenizerWhitespace
	case pb.TokenizerType_Prefix, pb.TokenizerType_Multilingual:
		return t, invalidf("field_index_params.text_index_params.tokenizer %s is not supported; trawl's text index tokenizes by word or whitespace", p.GetTokenizer())
	default:
		return t, invalidf("field_index_params.text_index_params.tokenizer %d is not a tokenizer; want Word or Whitespace", int32(p.GetTokenizer()))
	}
	if p.Lowercase != nil {
		t.Lowercase = p.GetLowercase()
	}
	for _, l := range []struct {
		name string
		v    *uint64
		dst  *int
	}{{"min_token_len", p.MinTokenLen, &t.MinTokenLen}, {"max_token_len", p.MaxTokenLen, &t.MaxTokenLen}} {
		if l.v == nil {
			continue
		}
		if *l.v > filter.MaxTokenLen {
			return t, invalidf("field_index_params.text_index_params.%s %d is over %d", l.name, *l.v, filter.MaxTokenLen)
		}
		*l.dst = int(*l.v)
	}
	if t.MaxTokenLen > 0 && t.MinTokenLen > t.MaxTokenLen {
		return t, invalidf("field_index_params.text_index_params: min_token_len %d is over max_token_len %d", t.MinTokenLen, t.MaxTokenLen)
	}
	switch {
	case p.GetPhraseMatching():
		return t, invalidf("field_index_params.text_index_params.phrase_matching is not supported; trawl's text index matches tokens, without phrase matching")
	case p.GetAsciiFolding():
		return t, invalidf("field_index_params.text_index_params.ascii_folding is not supported; trawl's text index matches tokens, without ascii folding")
	case p.Stopwords != nil:
		return t, invalidf("field_index_params.text_index_params.stopwords is not supported; trawl's text index keeps every token as written (lowercased if asked)")
	case p.Stemmer != nil:
		return t, invalidf("field_index_params.text_index_params.stemmer is not supported; trawl's text index keeps every token as written (lowercased if asked)")
	}
	return t, nil
}

// decodeAliases reads a ChangeAliases, checking every action before any
// is applied.
func decodeAliases(r *pb.ChangeAliases) ([]qdrantx.AliasChange, error) {
	out := make([]qdrantx.AliasChange, len(r.GetActions()))
	for i, a := range r.GetActions() {
		where := fmt.Sprintf("actions[%d]", i)
		name := func(what, v string) (string, error) {
			if v == "" {
				return "", invalidf("%s.%s is missing", where, what)
			}
			return v, nil
		}
		var c qdrantx.AliasChange
		var err error
		switch x := a.GetAction().(type) {
		case *pb.AliasOperations_CreateAlias:
			if c.Alias, err = name("create_alias.alias_name", x.CreateAlias.GetAliasName()); err == nil {
				c.Collection, err = name("create_alias.collection_name", x.CreateAlias.GetCollectionName())
			}
		case *pb.AliasOperations_DeleteAlias:
			c.Alias, err = name("delete_alias.alias_name", x.DeleteAlias.GetAliasName())
		case *pb.AliasOperations_RenameAlias:
			if c.Old, err = name("rename_alias.old_alias_name", x.RenameAlias.GetOldAliasName()); err == nil {
				c.Alias, err = name("rename_alias.new_alias_name", x.RenameAlias.GetNewAliasName())
			}
		default:
			err = invalidf("%s: want one of create_alias, delete_alias or rename_alias", where)
		}
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}
