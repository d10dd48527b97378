package qdrant

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/vector"
)

// The collection routes' decoders: what a Qdrant create, payload index
// and alias change become, and the exact 400 for everything refused.
// They run without a cluster (rest_test.go has the routes end to end).

func withFloat32(s catalog.Settings, f string) catalog.Settings {
	s.Float32 = f
	return s
}

func withSparse(s catalog.Settings, sp map[string]catalog.Sparse) catalog.Settings {
	s.Sparse = sp
	return s
}

func TestDecodeCreate(t *testing.T) {
	flat := func(dim int, m vector.Metric, q string) catalog.Settings {
		return catalog.Settings{Dim: dim, Metric: m, Quantization: q, Index: catalog.IndexFlat}
	}
	for _, tc := range []struct {
		name, body string
		want       catalog.Settings
	}{
		{"cosine", `{"vectors": {"size": 384, "distance": "Cosine"}}`, flat(384, vector.Cosine, catalog.QuantNone)},
		{"dot", `{"vectors": {"size": 768, "distance": "Dot"}}`, flat(768, vector.DotProduct, catalog.QuantNone)},
		{"euclid, limits", `{"vectors": {"size": 8192, "distance": "Euclid"}}`, flat(8192, vector.Euclidean, catalog.QuantNone)},
		{"scalar int8", `{"vectors": {"size": 1, "distance": "Cosine"}, "quantization_config": {"scalar": {"type": "int8", "quantile": 0.99, "always_ram": true}}}`,
			flat(1, vector.Cosine, catalog.QuantInt8)},
		{"scalar int8 on the vector", `{"vectors": {"size": 4, "distance": "Dot", "quantization_config": {"scalar": {"type": "int8"}}}}`,
			flat(4, vector.DotProduct, catalog.QuantInt8)},
		{"tuning accepted", `{"vectors": {"size": 8, "distance": "Cosine", "hnsw_config": {"m": 0}, "on_disk": true, "datatype": "float32"},
			"shard_number": 6, "replication_factor": 2, "write_consistency_factor": 1, "on_disk_payload": true, "sharding_method": "auto",
			"hnsw_config": {"m": 16, "ef_construct": 100}, "wal_config": {"wal_capacity_mb": 32}, "optimizers_config": {"indexing_threshold": 0},
			"sparse_vectors": {}, "strict_mode_config": {"enabled": false}, "metadata": {}, "quantization_config": null}`,
			withFloat32(flat(8, vector.Cosine, catalog.QuantNone), catalog.Float32OnDisk)},
		{"sparse vectors", `{"vectors": {"size": 8, "distance": "Dot"}, "sparse_vectors": {"text-sparse": {"modifier": "idf",
			"index": {"on_disk": true, "full_scan_threshold": 5000, "datatype": "float32"}}, "splade": {}, "bm": null}}`,
			withSparse(flat(8, vector.DotProduct, catalog.QuantNone), map[string]catalog.Sparse{
				"text-sparse": {Modifier: catalog.ModifierIDF}, "splade": {Modifier: catalog.ModifierNone}, "bm": {Modifier: catalog.ModifierNone}})},
		{"in memory", `{"vectors": {"size": 8, "distance": "Dot", "on_disk": false}, "quantization_config": {"scalar": {"type": "int8"}}}`,
			withFloat32(flat(8, vector.DotProduct, catalog.QuantInt8), catalog.Float32InMemory)},
		{"named, LlamaIndex's hybrid create", `{"vectors": {"text-dense": {"size": 384, "distance": "Cosine"}}, "sparse_vectors": {"text-sparse": {"modifier": "idf"}}}`,
			catalog.Settings{Named: map[string]catalog.Dense{"text-dense": {Dim: 384, Metric: vector.Cosine, Quantization: catalog.QuantNone}},
				Sparse: map[string]catalog.Sparse{"text-sparse": {Modifier: catalog.ModifierIDF}}}},
		{"named, int8 per vector and for all", `{"vectors": {"a": {"size": 4, "distance": "Euclid", "on_disk": false},
			"b": {"size": 2, "distance": "Dot", "quantization_config": {"scalar": {"type": "int8"}}}}}`,
			catalog.Settings{Named: map[string]catalog.Dense{"a": {Dim: 4, Metric: vector.Euclidean, Quantization: catalog.QuantNone},
				"b": {Dim: 2, Metric: vector.DotProduct, Quantization: catalog.QuantInt8}}}},
		{"named, int8 for all", `{"vectors": {"a": {"size": 4, "distance": "Dot"}}, "quantization_config": {"scalar": {"type": "int8"}}}`,
			catalog.Settings{Named: map[string]catalog.Dense{"a": {Dim: 4, Metric: vector.DotProduct, Quantization: catalog.QuantInt8}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeCreate([]byte(tc.body))
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestDecodeCreateRefuses(t *testing.T) {
	for _, tc := range []struct{ name, body, msg string }{
		{"empty", ``, "request body is empty, want a JSON object"},
		{"no vectors", `{"shard_number": 2}`, `vectors is missing: a trawl collection holds one dense vector per point; give {"size": N, "distance": "Cosine"|"Dot"|"Euclid"}`},
		{"named vector on disk", `{"vectors": {"text": {"size": 8, "distance": "Cosine", "on_disk": true}}}`,
			`vectors.text.on_disk true is not supported: a named vector's rows are kept in memory`},
		{"named vector size", `{"vectors": {"text": {"size": 0, "distance": "Cosine"}}}`, `vectors.text.size is 0, want 1..8192`},
		{"named vector distance", `{"vectors": {"a": {"size": 4, "distance": "Manhattan"}}}`, `vectors.a.distance Manhattan is not supported: trawl scores Cosine, Dot and Euclid`},
		{"no vectors", `{"vectors": {}}`,
			`vectors is {}: a trawl collection holds a dense vector; give {"size": N, "distance": ...} or {"name": {"size": N, "distance": ...}}`},
		{"vectors not an object", `{"vectors": 8}`, `vectors is a number, want {"size": N, "distance": "Cosine"|"Dot"|"Euclid"}`},
		{"size missing", `{"vectors": {"distance": "Cosine"}}`, "vectors.size is missing"},
		{"size 0", `{"vectors": {"size": 0, "distance": "Cosine"}}`, "vectors.size is 0, want 1..8192"},
		{"size over", `{"vectors": {"size": 8193, "distance": "Cosine"}}`, "vectors.size is 8193, want 1..8192"},
		{"distance missing", `{"vectors": {"size": 8}}`, `vectors.distance is missing: want "Cosine", "Dot" or "Euclid"`},
		{"manhattan", `{"vectors": {"size": 8, "distance": "Manhattan"}}`, "vectors.distance Manhattan is not supported: trawl scores Cosine, Dot and Euclid"},
		{"lowercase distance", `{"vectors": {"size": 8, "distance": "cosine"}}`, `vectors.distance "cosine" is not a distance: want "Cosine", "Dot" or "Euclid"`},
		{"unknown vector member", `{"vectors": {"size": 8, "distance": "Dot", "norm": true}}`, `vectors: json: unknown field "norm"`},
		{"multivector", `{"vectors": {"size": 8, "distance": "Dot", "multivector_config": {"comparator": "max_sim"}}}`,
			"vectors.multivector_config: multivectors are not supported: trawl stores one vector per point"},
		{"float16", `{"vectors": {"size": 8, "distance": "Dot", "datatype": "float16"}}`,
			`vectors.datatype "float16" is not supported: trawl stores float32 vectors (int8 codes beside them with quantization_config {"scalar": {"type": "int8"}})`},
		{"sparse modifier", `{"vectors": {"size": 8, "distance": "Dot"}, "sparse_vectors": {"s": {"modifier": "bm25"}}}`,
			`sparse_vectors.s.modifier is "bm25", want "none" or "idf"`},
		{"sparse datatype", `{"vectors": {"size": 8, "distance": "Dot"}, "sparse_vectors": {"s": {"index": {"datatype": "uint8"}}}}`,
			`sparse_vectors.s.index.datatype "uint8" is not supported: trawl keeps sparse values as float32, and a narrower type would change scores`},
		{"sparse unknown member", `{"vectors": {"size": 8, "distance": "Dot"}, "sparse_vectors": {"s": {"weights": 1}}}`,
			`sparse_vectors.s: json: unknown field "weights"`},
		{"sparse name", `{"vectors": {"size": 8, "distance": "Dot"}, "sparse_vectors": {"a b": {}}}`,
			`sparse_vectors: the name "a b": want 1..64 characters of [A-Za-z0-9_.-]`},
		{"sparse not an object", `{"vectors": {"size": 8, "distance": "Dot"}, "sparse_vectors": [1]}`,
			`sparse_vectors is an array, want {"name": {"modifier": "idf"}, ...}`},
		{"custom sharding", `{"vectors": {"size": 8, "distance": "Dot"}, "sharding_method": "custom"}`,
			`sharding_method "custom" is not supported: trawl places points by a hash of their id`},
		{"init_from", `{"vectors": {"size": 8, "distance": "Dot"}, "init_from": {"collection": "a"}}`,
			"init_from is not supported: create the collection, then upsert its points"},
		{"strict mode", `{"vectors": {"size": 8, "distance": "Dot"}, "strict_mode_config": {"enabled": true, "max_query_limit": 10}}`,
			"strict_mode_config.enabled is not supported: trawl does not refuse requests by a collection's strict-mode rules"},
		{"metadata", `{"vectors": {"size": 8, "distance": "Dot"}, "metadata": {"owner": "me"}}`,
			"metadata is not supported: trawl's catalog keeps no metadata for a collection"},
		{"shard_number 0", `{"vectors": {"size": 8, "distance": "Dot"}, "shard_number": 0}`, "shard_number is 0, want at least 1"},
		{"product", `{"vectors": {"size": 8, "distance": "Dot"}, "quantization_config": {"product": {"compression": "x16"}}}`,
			`quantization_config.product is not supported: trawl quantizes to int8 codes only ({"scalar": {"type": "int8"}})`},
		{"binary on the vector", `{"vectors": {"size": 8, "distance": "Dot", "quantization_config": {"binary": {"always_ram": true}}}}`,
			`vectors.quantization_config.binary is not supported: trawl quantizes to int8 codes only ({"scalar": {"type": "int8"}})`},
		{"scalar type", `{"vectors": {"size": 8, "distance": "Dot"}, "quantization_config": {"scalar": {"type": "int4"}}}`,
			`quantization_config.scalar.type is "int4", want int8`},
		{"scalar quantile", `{"vectors": {"size": 8, "distance": "Dot"}, "quantization_config": {"scalar": {"type": "int8", "quantile": 0.2}}}`,
			"quantization_config.scalar.quantile is 0.2, want 0.5..1"},
		{"unknown member", `{"vectors": {"size": 8, "distance": "Dot"}, "shards": 2}`, `bad JSON: json: unknown field "shards"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeCreate([]byte(tc.body))
			require.Equal(t, wire.Invalid(tc.msg), err)
		})
	}
}

func TestDecodeFieldIndex(t *testing.T) {
	for _, tc := range []struct{ body, field, schema, msg string }{
		{body: `{"field_name": "color", "field_schema": "keyword"}`, field: "color", schema: "keyword"},
		{body: `{"field_name": "metadata.source", "field_schema": {"type": "keyword", "is_tenant": true}}`, field: "metadata.source", schema: "keyword"},
		{body: `{"field_name": "n", "field_type": "integer"}`, field: "n", schema: "integer"},
		{body: `{"field_name": "n", "field_schema": {"type": "integer", "lookup": false, "range": true}}`, field: "n", schema: "integer"},
		{body: `{"field_name": "at", "field_schema": "datetime"}`, field: "at", schema: "datetime"},
		{body: `{"field_name": "body", "field_schema": {"type": "text", "tokenizer": "word"}}`, field: "body", schema: "text"},
		{body: `{"field_name": "body", "field_schema": "text"}`, field: "body", schema: "text"},
		{body: `{"field_name": "body", "field_schema": {"type": "text", "tokenizer": "whitespace", "lowercase": false, "min_token_len": 2, "max_token_len": 20, "on_disk": true}}`,
			field: "body", schema: `text{"tokenizer":"whitespace","lowercase":false,"min_token_len":2,"max_token_len":20}`},
		{body: `{"field_name": "body", "field_schema": {"type": "text", "tokenizer": "prefix"}}`, msg: `field_schema.tokenizer: "prefix" is not supported; trawl's text index tokenizes by word or whitespace`},
		{body: `{"field_name": "body", "field_schema": {"type": "text", "tokenizer": "multilingual"}}`, msg: `field_schema.tokenizer: "multilingual" is not supported; trawl's text index tokenizes by word or whitespace`},
		{body: `{"field_name": "body", "field_schema": {"type": "text", "min_token_len": "2"}}`, msg: `field_schema.min_token_len: is "2", want an integer in 0..65536`},
		{body: `{"field_name": "body", "field_schema": {"type": "text", "stemmer": {"type": "snowball", "language": "english"}}}`, msg: `field_schema.stemmer: is not supported; trawl's text index keeps every token as written (lowercased if asked)`},
		{body: `{"field_name": "body", "field_schema": {"type": "text", "tokeniser": "word"}}`, msg: `field_schema.tokeniser: unknown field; a text index takes type, tokenizer, lowercase, min_token_len and max_token_len`},
		{body: `{"field_name": "loc", "field_schema": "geo"}`, field: "loc", schema: "geo"},
		{body: `{"field_name": "x", "field_schema": "float"}`, field: "x", schema: "float"},
		{body: `{"field_name": "b", "field_schema": "bool"}`, field: "b", schema: "bool"},
		{body: `{"field_name": "u", "field_schema": "uuid"}`, field: "u", schema: "uuid"},
		{body: `{"field_name": "u", "field_schema": {"type": "uuid", "is_tenant": true}}`, field: "u", schema: "uuid"},
		{body: `{"field_name": "x", "field_schema": "vector"}`, msg: `field_schema "vector" is not a payload schema type: want keyword, integer, float, bool, datetime, geo, uuid or text`},
		{body: `{"field_name": "x"}`, msg: "Can't auto-detect field type, please specify `field_schema` in the request"},
		{body: `{"field_schema": "keyword"}`, msg: "field_name is missing"},
		{body: `{"field_name": "a..b", "field_schema": "keyword"}`, msg: `field_name "a..b" is not a payload key: a key is a dotted path like meta.draft`},
		{body: `{"field_name": "x", "field_schema": "keyword", "field_type": "keyword"}`, msg: "give field_schema or field_type (its older name), not both"},
		{body: `{"field_name": "x", "field_schema": 3}`, msg: `field_schema is a number, want a type ("keyword", "integer", ...) or {"type": ..., params}`},
	} {
		t.Run(tc.body, func(t *testing.T) {
			field, schema, err := decodeFieldIndex([]byte(tc.body))
			if tc.msg != "" {
				require.Equal(t, wire.Invalid(tc.msg), err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.field, field)
			require.Equal(t, tc.schema, schema)
		})
	}
}

func TestDecodeAliases(t *testing.T) {
	got, err := decodeAliases([]byte(`{"actions": [
		{"create_alias": {"collection_name": "notes_v2", "alias_name": "notes"}},
		{"rename_alias": {"old_alias_name": "a", "new_alias_name": "b"}},
		{"delete_alias": {"alias_name": "old"}}]}`))
	require.NoError(t, err)
	require.Equal(t, []qdrantx.AliasChange{{Alias: "notes", Collection: "notes_v2"}, {Alias: "b", Old: "a"}, {Alias: "old"}}, got)
	got, err = decodeAliases([]byte(`{"actions": []}`))
	require.NoError(t, err)
	require.Empty(t, got)

	for _, tc := range []struct{ body, msg string }{
		{`{}`, "actions is missing"},
		{`{"actions": [{"create_alias": {"alias_name": "a"}}]}`, "actions[0]: create_alias.collection_name is missing"},
		{`{"actions": [{"delete_alias": {"alias_name": "a"}}, {"delete_alias": {}}]}`, "actions[1]: delete_alias.alias_name is missing"},
		{`{"actions": [{"rename_alias": {"old_alias_name": "a"}}]}`, "actions[0]: rename_alias.new_alias_name is missing"},
		{`{"actions": [{}]}`, "actions[0]: want exactly one of create_alias, delete_alias or rename_alias"},
		{`{"actions": [{"delete_alias": {"alias_name": "a"}, "create_alias": {"alias_name": "a", "collection_name": "c"}}]}`,
			"actions[0]: want exactly one of create_alias, delete_alias or rename_alias"},
		{`{"actions": [{"drop_alias": {"alias_name": "a"}}]}`, `actions[0]: bad JSON: json: unknown field "drop_alias"`},
	} {
		t.Run(tc.body, func(t *testing.T) {
			_, err := decodeAliases([]byte(tc.body))
			require.Equal(t, wire.Invalid(tc.msg), err)
		})
	}
}

func TestDecodeQueryBatch(t *testing.T) {
	sch := coordinator.Schema{Dim: 2, Metric: vector.Cosine}
	qs, err := decodeQueryBatch([]byte(`{"searches": [{"query": [1, 0], "limit": 3}, {"query": {"nearest": 42}, "offset": 1}, {"query": "8a1e0c4a-7b4f-4c1e-9d2a-0123456789ab"}]}`), sch)
	require.NoError(t, err)
	require.Len(t, qs, 3)
	require.Equal(t, []float32{1, 0}, qs[0].q.Vector)
	require.Equal(t, 3, qs[0].q.K)
	require.Equal(t, "42", qs[1].q.LikeID)
	require.Equal(t, DefaultLimit+1, qs[1].q.K, "offset hits are fetched and skipped")
	require.Equal(t, 1, qs[1].offset)
	require.Equal(t, "8a1e0c4a-7b4f-4c1e-9d2a-0123456789ab", qs[2].q.LikeID)

	for _, tc := range []struct{ body, msg string }{
		{`{"searches": []}`, "searches has 0 entries, want 1..256"},
		{`{"searches": [{"query": [1, 0]}, {"query": [1, 0, 0]}]}`, "searches[1]: query: vector has 3 dimensions, want 2"},
		{`{"searches": [{"query": [1, 0], "prefetch": [{"query": [1, 0], "offset": 1}]}]}`, `searches[0]: prefetch[0]: bad JSON: json: unknown field "offset"`},
		{`{"searches": [{"query": [1, 0]}], "consistency": "all"}`, `bad JSON: json: unknown field "consistency"`},
	} {
		t.Run(tc.body, func(t *testing.T) {
			_, err := decodeQueryBatch([]byte(tc.body), sch)
			require.Equal(t, wire.Invalid(tc.msg), err)
		})
	}
}
