package qdrant

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/coordinator"
)

// createJSON is Qdrant's CreateCollection, as far as trawl reads it.
type createJSON struct {
	Vectors                json.RawMessage `json:"vectors"`
	SparseVectors          json.RawMessage `json:"sparse_vectors"`
	ShardNumber            json.RawMessage `json:"shard_number"`
	ShardingMethod         *string         `json:"sharding_method"`
	ReplicationFactor      json.RawMessage `json:"replication_factor"`
	WriteConsistencyFactor json.RawMessage `json:"write_consistency_factor"`
	OnDiskPayload          json.RawMessage `json:"on_disk_payload"`
	HNSWConfig             json.RawMessage `json:"hnsw_config"`
	WALConfig              json.RawMessage `json:"wal_config"`
	OptimizersConfig       json.RawMessage `json:"optimizers_config"`
	QuantizationConfig     json.RawMessage `json:"quantization_config"`
	StrictModeConfig       json.RawMessage `json:"strict_mode_config"`
	Metadata               json.RawMessage `json:"metadata"`
	InitFrom               json.RawMessage `json:"init_from"`
}

// checkCreate accepts a create that describes the collection as it is:
// one unnamed dense float32 vector of the cluster's size and distance.
// Shape and tuning members (shards, replication, HNSW, WAL, optimizer,
// quantization) are accepted and ignored: the cluster's are set where the
// shards run.
func checkCreate(b []byte, sch coordinator.Schema, name string) error {
	var req createJSON
	if err := wire.DecodeStrict(b, &req); err != nil {
		return err
	}
	if wire.IsSet(req.SparseVectors) && !bytes.Equal(bytes.TrimSpace(req.SparseVectors), []byte("{}")) {
		return wire.Invalid("sparse_vectors are not supported: trawl stores one dense vector per point")
	}
	if req.ShardingMethod != nil && *req.ShardingMethod != "auto" {
		return wire.Invalid(fmt.Sprintf("sharding_method %q is not supported: trawl places points by a hash of their id", *req.ShardingMethod))
	}
	if err := refuseSet(req.InitFrom, "init_from is not supported: trawl serves one collection"); err != nil {
		return err
	}
	if !wire.IsSet(req.Vectors) {
		return wire.Invalid(fmt.Sprintf(`vectors is missing: collection %s holds vectors of {"size": %d, "distance": %q}`, name, sch.Dim, distanceOf(sch.Metric)))
	}
	var params struct {
		Size              *int            `json:"size"`
		Distance          *string         `json:"distance"`
		HNSWConfig        json.RawMessage `json:"hnsw_config"`
		QuantizationCfg   json.RawMessage `json:"quantization_config"`
		OnDisk            json.RawMessage `json:"on_disk"`
		Datatype          *string         `json:"datatype"`
		MultivectorConfig json.RawMessage `json:"multivector_config"`
	}
	if err := wire.DecodeStrict(req.Vectors, &params); err != nil || params.Size == nil || params.Distance == nil {
		return wire.Invalid(`vectors: ` + errNamedVectors + `; give {"size": N, "distance": "Cosine"|"Dot"|"Euclid"}`)
	}
	if err := refuseSet(params.MultivectorConfig, "vectors.multivector_config: multivectors are not supported: trawl stores one vector per point"); err != nil {
		return err
	}
	if params.Datatype != nil && *params.Datatype != "float32" {
		return wire.Invalid(fmt.Sprintf("vectors.datatype %q is not supported: trawl stores float32 (int8 codes are the shards' --quantization)", *params.Datatype))
	}
	want := distanceOf(sch.Metric)
	if *params.Size != sch.Dim || *params.Distance != want {
		return wire.Invalid(fmt.Sprintf("collection %s exists with vectors of size %d and distance %s (the shards' --dim and --metric), not size %d and distance %s",
			name, sch.Dim, want, *params.Size, *params.Distance))
	}
	return nil
}
