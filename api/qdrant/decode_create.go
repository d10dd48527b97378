package qdrant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
	"github.com/trawl-search/trawl/catalog"
)

// tuning is a Qdrant config object that tunes structures trawl does not
// have (HNSW, WAL, optimizers): any object is accepted.
type tuning = *map[string]json.RawMessage

// createJSON is Qdrant's CreateCollection.
type createJSON struct {
	Vectors                json.RawMessage `json:"vectors"`
	SparseVectors          json.RawMessage `json:"sparse_vectors"`
	ShardNumber            *int            `json:"shard_number"`
	ShardingMethod         *string         `json:"sharding_method"`
	ReplicationFactor      *int            `json:"replication_factor"`
	WriteConsistencyFactor *int            `json:"write_consistency_factor"`
	OnDiskPayload          *bool           `json:"on_disk_payload"`
	HNSWConfig             tuning          `json:"hnsw_config"`
	WALConfig              tuning          `json:"wal_config"`
	OptimizersConfig       tuning          `json:"optimizers_config"`
	QuantizationConfig     json.RawMessage `json:"quantization_config"`
	StrictModeConfig       json.RawMessage `json:"strict_mode_config"`
	Metadata               json.RawMessage `json:"metadata"`
	// InitFrom is in older Qdrant releases' CreateCollection.
	InitFrom json.RawMessage `json:"init_from"`
}

// vectorParamsJSON is Qdrant's VectorParams.
type vectorParamsJSON struct {
	Size               *int            `json:"size"`
	Distance           *string         `json:"distance"`
	HNSWConfig         tuning          `json:"hnsw_config"`
	QuantizationConfig json.RawMessage `json:"quantization_config"`
	OnDisk             *bool           `json:"on_disk"`
	Datatype           *string         `json:"datatype"`
	MultivectorConfig  json.RawMessage `json:"multivector_config"`
}

// decodeCreate reads a CreateCollection as the settings of a trawl
// collection: one unnamed dense float32 vector of vectors.size and
// vectors.distance, int8 codes when quantization_config is scalar, and a
// flat index (Qdrant's request cannot ask for trawl's IVF), and the
// float32 rows on disk or in memory as vectors.on_disk says (trawl's
// default for the quantization when it is absent). Members that tune
// what trawl does not have (HNSW, WAL, optimizers, shard and replica
// counts, on_disk_payload) are accepted; members that would change an
// answer trawl cannot give are refused by name.
func decodeCreate(b []byte) (catalog.Settings, error) {
	var req createJSON
	if err := wire.DecodeStrict(b, &req); err != nil {
		return catalog.Settings{}, err
	}
	sparse, err := decodeSparseParams(req.SparseVectors)
	if err != nil {
		return catalog.Settings{}, err
	}
	if req.ShardingMethod != nil && *req.ShardingMethod != "auto" {
		return catalog.Settings{}, wire.Invalid(fmt.Sprintf("sharding_method %q is not supported: trawl places points by a hash of their id", *req.ShardingMethod))
	}
	if err := refuseSet(req.InitFrom, "init_from is not supported: create the collection, then upsert its points"); err != nil {
		return catalog.Settings{}, err
	}
	if err := checkStrictMode(req.StrictModeConfig); err != nil {
		return catalog.Settings{}, err
	}
	if wire.IsSet(req.Metadata) && !bytes.Equal(bytes.TrimSpace(req.Metadata), []byte("{}")) {
		return catalog.Settings{}, wire.Invalid("metadata is not supported: trawl's catalog keeps no metadata for a collection")
	}
	for _, c := range []struct {
		name string
		v    *int
	}{{"shard_number", req.ShardNumber}, {"replication_factor", req.ReplicationFactor}, {"write_consistency_factor", req.WriteConsistencyFactor}} {
		if c.v != nil && *c.v < 1 {
			return catalog.Settings{}, wire.Invalid(fmt.Sprintf("%s is %d, want at least 1", c.name, *c.v))
		}
	}
	if !wire.IsSet(req.Vectors) {
		return catalog.Settings{}, wire.Invalid(`vectors is missing: a trawl collection holds one dense vector per point; give {"size": N, "distance": "Cosine"|"Dot"|"Euclid"}`)
	}
	if isNamedParams(req.Vectors) {
		named, err := decodeNamedParams(req.Vectors, req.QuantizationConfig)
		if err != nil {
			return catalog.Settings{}, err
		}
		return catalog.Settings{Named: named, Sparse: sparse}, nil
	}
	params, err := decodeVectorParams(req.Vectors)
	if err != nil {
		return catalog.Settings{}, err
	}
	s := catalog.Settings{Dim: *params.Size, Metric: qdrantx.Distances[*params.Distance], Quantization: catalog.QuantNone, Index: catalog.IndexFlat}
	for _, q := range []struct {
		where string
		raw   json.RawMessage
	}{{"quantization_config", req.QuantizationConfig}, {"vectors.quantization_config", params.QuantizationConfig}} {
		scalar, err := decodeQuantization(q.raw, q.where)
		if err != nil {
			return catalog.Settings{}, err
		}
		if scalar {
			s.Quantization = catalog.QuantInt8
		}
	}
	s.Float32 = qdrantx.Float32(params.OnDisk)
	s.Sparse = sparse
	return s, nil
}

// decodeVectorParams reads vectors: one VectorParams (named vectors, an
// object of them, are refused) with a size trawl allows and a distance
// it scores.
func decodeVectorParams(raw json.RawMessage) (vectorParamsJSON, error) {
	return decodeVectorParamsAt(raw, "vectors")
}

// decodeVectorParamsAt is decodeVectorParams of the VectorParams at where
// (vectors, or vectors.NAME for a named vector).
func decodeVectorParamsAt(raw json.RawMessage, where string) (vectorParamsJSON, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(raw, &probe); err != nil {
		return vectorParamsJSON{}, wire.Invalid(where + ` is ` + wire.JSONKind(raw) + `, want {"size": N, "distance": "Cosine"|"Dot"|"Euclid"}`)
	}
	_, hasSize := probe["size"]
	_, hasDistance := probe["distance"]
	if !hasSize && !hasDistance {
		return vectorParamsJSON{}, wire.Invalid(where + `: ` + errNamedVectors + `; give {"size": N, "distance": "Cosine"|"Dot"|"Euclid"}`)
	}
	var p vectorParamsJSON
	if err := wire.DecodeStrict(raw, &p); err != nil {
		return vectorParamsJSON{}, wire.Invalid(where + ": " + strings.TrimPrefix(err.Error(), "bad JSON: "))
	}
	switch {
	case p.Size == nil:
		return vectorParamsJSON{}, wire.Invalid(where + ".size is missing")
	case *p.Size < catalog.MinDim || *p.Size > catalog.MaxDim:
		return vectorParamsJSON{}, wire.Invalid(fmt.Sprintf("%s.size is %d, want %d..%d", where, *p.Size, catalog.MinDim, catalog.MaxDim))
	case p.Distance == nil:
		return vectorParamsJSON{}, wire.Invalid(where + `.distance is missing: want "Cosine", "Dot" or "Euclid"`)
	case *p.Distance == "Manhattan":
		return vectorParamsJSON{}, wire.Invalid(where + ".distance Manhattan is not supported: trawl scores Cosine, Dot and Euclid")
	}
	if _, ok := qdrantx.Distances[*p.Distance]; !ok {
		return vectorParamsJSON{}, wire.Invalid(fmt.Sprintf(`%s.distance %q is not a distance: want "Cosine", "Dot" or "Euclid"`, where, *p.Distance))
	}
	if err := refuseSet(p.MultivectorConfig, where+".multivector_config: multivectors are not supported: trawl stores one vector per point"); err != nil {
		return vectorParamsJSON{}, err
	}
	if p.Datatype != nil && *p.Datatype != "float32" {
		return vectorParamsJSON{}, wire.Invalid(fmt.Sprintf(
			`%s.datatype %q is not supported: trawl stores float32 vectors (int8 codes beside them with quantization_config {"scalar": {"type": "int8"}})`, where, *p.Datatype))
	}
	return p, nil
}

// decodeQuantization reads a QuantizationConfig: scalar int8 is trawl's
// int8 codes (re-scored in float32, as Qdrant re-scores); quantile and
// always_ram tune how codes are made and kept and are accepted. Product,
// binary and turbo quantization are refused.
func decodeQuantization(raw json.RawMessage, where string) (scalar bool, err error) {
	if !wire.IsSet(raw) {
		return false, nil
	}
	var kinds map[string]json.RawMessage
	if err := json.Unmarshal(raw, &kinds); err != nil || len(kinds) != 1 {
		return false, wire.Invalid(fmt.Sprintf(`%s is %s, want {"scalar": {"type": "int8"}}`, where, wire.JSONKind(raw)))
	}
	kind := slices.Collect(maps.Keys(kinds))[0]
	if kind != "scalar" {
		return false, wire.Invalid(fmt.Sprintf(`%s.%s is not supported: trawl quantizes to int8 codes only ({"scalar": {"type": "int8"}})`, where, kind))
	}
	var sc struct {
		Type      *string  `json:"type"`
		Quantile  *float64 `json:"quantile"`
		AlwaysRAM *bool    `json:"always_ram"`
	}
	if err := wire.DecodeStrict(kinds[kind], &sc); err != nil {
		return false, wire.Invalid(where + ".scalar: " + strings.TrimPrefix(err.Error(), "bad JSON: "))
	}
	if sc.Type == nil || *sc.Type != "int8" {
		got := "missing"
		if sc.Type != nil {
			got = fmt.Sprintf("%q", *sc.Type)
		}
		return false, wire.Invalid(fmt.Sprintf("%s.scalar.type is %s, want int8", where, got))
	}
	if q := sc.Quantile; q != nil && (*q < 0.5 || *q > 1) {
		return false, wire.Invalid(fmt.Sprintf("%s.scalar.quantile is %g, want 0.5..1", where, *q))
	}
	return true, nil
}

// checkStrictMode refuses an enabled strict mode: it would refuse
// requests by rules trawl does not apply (unindexed filters, limits).
func checkStrictMode(raw json.RawMessage) error {
	if !wire.IsSet(raw) {
		return nil
	}
	var sm struct {
		Enabled *bool `json:"enabled"`
	}
	if err := json.Unmarshal(raw, &sm); err != nil {
		return wire.Invalid("strict_mode_config is " + wire.JSONKind(raw) + ", want an object")
	}
	if sm.Enabled != nil && *sm.Enabled {
		return wire.Invalid("strict_mode_config.enabled is not supported: trawl does not refuse requests by a collection's strict-mode rules")
	}
	return nil
}
