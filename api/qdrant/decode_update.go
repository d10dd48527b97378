package qdrant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
)

// updateJSON is Qdrant's UpdateCollection.
type updateJSON struct {
	OptimizersConfig   tuning          `json:"optimizers_config"`
	Params             json.RawMessage `json:"params"`
	HNSWConfig         tuning          `json:"hnsw_config"`
	Vectors            json.RawMessage `json:"vectors"`
	QuantizationConfig json.RawMessage `json:"quantization_config"`
	SparseVectors      json.RawMessage `json:"sparse_vectors"`
	StrictModeConfig   json.RawMessage `json:"strict_mode_config"`
	Metadata           json.RawMessage `json:"metadata"`
}

// paramsDiffJSON is Qdrant's CollectionParamsDiff.
type paramsDiffJSON struct {
	ReplicationFactor      *uint64 `json:"replication_factor"`
	WriteConsistencyFactor *uint64 `json:"write_consistency_factor"`
	ReadFanOutFactor       *uint64 `json:"read_fan_out_factor"`
	ReadFanOutDelayMS      *uint64 `json:"read_fan_out_delay_ms"`
	OnDiskPayload          *bool   `json:"on_disk_payload"`
}

// vectorParamsDiffJSON is Qdrant's VectorParamsDiff, with the members of
// VectorParams a client might try to change named so the refusal can say
// why.
type vectorParamsDiffJSON struct {
	HNSWConfig         tuning          `json:"hnsw_config"`
	QuantizationConfig json.RawMessage `json:"quantization_config"`
	OnDisk             *bool           `json:"on_disk"`
	Size               json.RawMessage `json:"size"`
	Distance           json.RawMessage `json:"distance"`
	Datatype           json.RawMessage `json:"datatype"`
	MultivectorConfig  json.RawMessage `json:"multivector_config"`
}

// decodeUpdate reads an UpdateCollection: quantization_config (top level
// or the unnamed vector's: scalar int8 or "Disabled") and vectors.on_disk
// as an Update for qdrantx.ApplyUpdate to check against the collection;
// optimizers_config, hnsw_config (the collection's or the vector's) and
// params.on_disk_payload tune what trawl does not have and are accepted,
// as in a create; the rest is refused by name.
func decodeUpdate(b []byte) (qdrantx.Update, error) {
	var req updateJSON
	var u qdrantx.Update
	if err := wire.DecodeStrict(b, &req); err != nil {
		return u, err
	}
	if wire.IsSet(req.SparseVectors) && !bytes.Equal(bytes.TrimSpace(req.SparseVectors), []byte("{}")) {
		return u, wire.Invalid("sparse_vectors are not supported: trawl stores one dense vector per point")
	}
	if err := checkStrictMode(req.StrictModeConfig); err != nil {
		return u, err
	}
	if wire.IsSet(req.Metadata) && !bytes.Equal(bytes.TrimSpace(req.Metadata), []byte("{}")) {
		return u, wire.Invalid("metadata is not supported: trawl's catalog keeps no metadata for a collection")
	}
	if wire.IsSet(req.Params) {
		var p paramsDiffJSON
		if err := wire.DecodeStrict(req.Params, &p); err != nil {
			return u, wire.Invalid("params: " + strings.TrimPrefix(err.Error(), "bad JSON: "))
		}
		if p.ReadFanOutFactor != nil && *p.ReadFanOutFactor != 0 {
			return u, wire.Invalid("params.read_fan_out_factor is not supported: trawl reads one replica of each shard, and a slow one is hedged by the router's own rules")
		}
		u.ReplicationFactor, u.WriteConsistencyFactor = p.ReplicationFactor, p.WriteConsistencyFactor
	}
	if err := updateQuantization(&u, req.QuantizationConfig, "quantization_config"); err != nil {
		return u, err
	}
	if wire.IsSet(req.Vectors) {
		var byName map[string]json.RawMessage
		if err := json.Unmarshal(req.Vectors, &byName); err != nil {
			return u, wire.Invalid(`vectors is ` + wire.JSONKind(req.Vectors) + `, want {"": {"on_disk": ..., "quantization_config": ...}}`)
		}
		for name, raw := range byName {
			if name != "" {
				return u, wire.Invalid(fmt.Sprintf("vectors.%s: %s; the collection's one vector is named \"\"", name, errNamedVectors))
			}
			var p vectorParamsDiffJSON
			if err := wire.DecodeStrict(raw, &p); err != nil {
				return u, wire.Invalid(`vectors."": ` + strings.TrimPrefix(err.Error(), "bad JSON: "))
			}
			for _, fixed := range []struct {
				member string
				raw    json.RawMessage
			}{{"size", p.Size}, {"distance", p.Distance}, {"datatype", p.Datatype}, {"multivector_config", p.MultivectorConfig}} {
				if wire.IsSet(fixed.raw) {
					return u, wire.Invalid(fmt.Sprintf(`vectors."".%s cannot change: it is fixed when the collection is created`, fixed.member))
				}
			}
			if err := updateQuantization(&u, p.QuantizationConfig, `vectors."".quantization_config`); err != nil {
				return u, err
			}
			u.OnDisk = p.OnDisk
		}
	}
	return u, nil
}

// updateQuantization reads a QuantizationConfigDiff at where: "Disabled"
// turns int8 codes off, scalar int8 on (decodeQuantization's checks).
func updateQuantization(u *qdrantx.Update, raw json.RawMessage, where string) error {
	if !wire.IsSet(raw) {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s != "Disabled" {
			return wire.Invalid(fmt.Sprintf(`%s is %q, want "Disabled" or {"scalar": {"type": "int8"}}`, where, s))
		}
		return u.SetInt8(false, where)
	}
	if _, err := decodeQuantization(raw, where); err != nil {
		return err
	}
	return u.SetInt8(true, where)
}
