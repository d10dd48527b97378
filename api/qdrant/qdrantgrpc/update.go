package qdrantgrpc

import (
	"context"
	"fmt"

	"github.com/trawl-search/trawl/api/apikey"
	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
)

// Update is REST's PATCH /collections/{name}: int8 codes switched on or
// off online; what restates the settings or tunes what trawl does not
// have changes nothing; each change trawl cannot make is InvalidArgument
// naming its field (qdrantx.ApplyUpdate).
func (c *collectionsService) Update(ctx context.Context, r *pb.UpdateCollection) (*pb.CollectionOperationResponse, error) {
	name := r.GetCollectionName()
	if err := c.s.permit(ctx, name, apikey.Write); err != nil {
		return nil, err
	}
	u, err := decodeUpdate(r)
	if err != nil {
		return nil, err
	}
	if err := qdrantx.ApplyUpdate(ctx, c.s.cfg.Coordinator, name, u); err != nil {
		return nil, err
	}
	return &pb.CollectionOperationResponse{Result: true, Time: elapsed(ctx)}, nil
}

// decodeUpdate reads an UpdateCollection as the REST decoder does.
func decodeUpdate(r *pb.UpdateCollection) (qdrantx.Update, error) {
	var u qdrantx.Update
	switch {
	case len(r.GetSparseVectorsConfig().GetMap()) > 0:
		return u, wire.Invalid("sparse_vectors_config: " + qdrantx.ErrSparse)
	case r.GetStrictModeConfig().GetEnabled():
		return u, wire.Invalid("strict_mode_config.enabled is not supported: trawl does not refuse requests by a collection's strict-mode rules")
	case len(r.GetMetadata()) > 0:
		return u, wire.Invalid("metadata is not supported: trawl's catalog keeps no metadata for a collection")
	case r.GetParams().GetReadFanOutFactor() != 0:
		return u, wire.Invalid("params.read_fan_out_factor is not supported: trawl reads one replica of each shard, and a slow one is hedged by the router's own rules")
	}
	if p := r.GetParams(); p != nil {
		if p.ReplicationFactor != nil {
			u.ReplicationFactor = ptr(uint64(*p.ReplicationFactor))
		}
		if p.WriteConsistencyFactor != nil {
			u.WriteConsistencyFactor = ptr(uint64(*p.WriteConsistencyFactor))
		}
	}
	if err := updateQuantization(&u, r.QuantizationConfig, "quantization_config"); err != nil {
		return u, err
	}
	var p *pb.VectorParamsDiff
	where := "vectors_config.params"
	switch x := r.GetVectorsConfig().GetConfig().(type) {
	case *pb.VectorsConfigDiff_Params:
		p = x.Params
	case *pb.VectorsConfigDiff_ParamsMap:
		for name, v := range x.ParamsMap.GetMap() {
			if name != "" {
				return u, invalidf("vectors_config.params_map.%s: %s; the collection's one vector is named \"\"", name, qdrantx.ErrNamedVectors)
			}
			p, where = v, `vectors_config.params_map.""`
		}
	}
	if p != nil {
		if err := updateQuantization(&u, p.QuantizationConfig, where+".quantization_config"); err != nil {
			return u, err
		}
		u.OnDisk = p.OnDisk
	}
	return u, nil
}

// updateQuantization reads a QuantizationConfigDiff at where: disabled
// turns int8 codes off, scalar Int8 on (decodeQuantization's checks).
func updateQuantization(u *qdrantx.Update, q *pb.QuantizationConfigDiff, where string) error {
	var cfg *pb.QuantizationConfig
	switch x := q.GetQuantization().(type) {
	case nil:
		return nil
	case *pb.QuantizationConfigDiff_Disabled:
		return u.SetInt8(false, where)
	case *pb.QuantizationConfigDiff_Scalar:
		cfg = &pb.QuantizationConfig{Quantization: &pb.QuantizationConfig_Scalar{Scalar: x.Scalar}}
	case *pb.QuantizationConfigDiff_Product:
		cfg = &pb.QuantizationConfig{Quantization: &pb.QuantizationConfig_Product{Product: x.Product}}
	case *pb.QuantizationConfigDiff_Binary:
		cfg = &pb.QuantizationConfig{Quantization: &pb.QuantizationConfig_Binary{Binary: x.Binary}}
	default:
		return wire.Invalid(fmt.Sprintf("%s is not supported: trawl quantizes to int8 codes only (scalar Int8)", where))
	}
	if _, err := decodeQuantization(cfg, where); err != nil {
		return err
	}
	return u.SetInt8(true, where)
}
