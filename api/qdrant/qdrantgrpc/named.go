package qdrantgrpc

import (
	"maps"
	"slices"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
)

// Named dense vectors over gRPC, as over REST (../decode_named.go): a
// create's params_map, a point's named vectors, queries using one, and
// answers' named vectors.

// decodeNamedParams reads a create's params_map of named vectors. A
// vector's quantization_config overrides the collection's (top), as in
// Qdrant; on_disk true is refused (named rows are kept in memory).
func decodeNamedParams(m map[string]*pb.VectorParams, top *pb.QuantizationConfig) (map[string]catalog.Dense, error) {
	if len(m) > catalog.MaxNamedVectors {
		return nil, invalidf("vectors_config.params_map names %d vectors, at most %d", len(m), catalog.MaxNamedVectors)
	}
	topScalar, err := decodeQuantization(top, "quantization_config")
	if err != nil {
		return nil, err
	}
	out := make(map[string]catalog.Dense, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		p := m[name]
		where := "vectors_config.params_map." + name
		if name == "" {
			return nil, wire.Invalid(`vectors_config.params_map: the name "" is the unnamed vector's; give params for it, or name every vector`)
		}
		if err := catalog.ValidName(name); err != nil {
			return nil, invalidf("vectors_config.params_map: the name %q: want 1..%d characters of [A-Za-z0-9_.-]", name, catalog.MaxNameLen)
		}
		if p.GetSize() < catalog.MinDim || p.GetSize() > catalog.MaxDim {
			return nil, invalidf("%s.size is %d, want %d..%d", where, p.GetSize(), catalog.MinDim, catalog.MaxDim)
		}
		d := p.GetDistance()
		metric, ok := qdrantx.Distances[d.String()]
		if !ok || d == pb.Distance_Manhattan {
			return nil, invalidf("%s.distance %s is not supported: trawl scores Cosine, Dot and Euclid", where, d.String())
		}
		if p.MultivectorConfig != nil {
			return nil, wire.Invalid(where + ".multivector_config: " + qdrantx.ErrMulti)
		}
		if p.Datatype != nil && *p.Datatype != pb.Datatype_Default && *p.Datatype != pb.Datatype_Float32 {
			return nil, invalidf("%s.datatype %s is not supported: trawl stores float32 vectors", where, p.Datatype.String())
		}
		if p.OnDisk != nil && *p.OnDisk {
			return nil, invalidf("%s.on_disk true is not supported: a named vector's rows are kept in memory", where)
		}
		scalar := topScalar
		if p.QuantizationConfig != nil {
			if scalar, err = decodeQuantization(p.QuantizationConfig, where+".quantization_config"); err != nil {
				return nil, err
			}
		}
		dn := catalog.Dense{Dim: int(p.GetSize()), Metric: metric, Quantization: catalog.QuantNone}
		if scalar {
			dn.Quantization = catalog.QuantInt8
		}
		out[name] = dn
	}
	return out, nil
}

// denseUsing is the schema a dense query vector is checked against and
// the named vector it searches: using when it names one of the
// collection's named dense vectors ("" for the unnamed one). ok is false
// when using names none of the collection's dense vectors (the caller
// then tries its sparse ones). A collection of named vectors needs using.
func denseUsing(using *string, sch coordinator.Schema) (coordinator.Schema, string, bool, error) {
	if using == nil || *using == "" {
		if sch.Dim == 0 && len(sch.Named) > 0 {
			return sch, "", true, invalidf("using is missing: the collection's vectors are named (%s); name the one the query searches", sch.NamedList())
		}
		return sch, "", true, nil
	}
	vs, ok := sch.ForVector(*using)
	if !ok {
		if _, sparse := sch.Sparse[*using]; !sparse && len(sch.Named) > 0 {
			return sch, "", false, invalidf("using: the collection has no vector named %q (its vectors: %s)", *using, sch.VectorNames())
		}
		return sch, "", false, nil
	}
	return vs, *using, true, nil
}

// isSparseQuery reports whether a QueryPoints asks by a sparse vector
// (which names it in using, so a missing using is not a dense one's).
func isSparseQuery(r *pb.QueryPoints) bool {
	_, ok := r.GetQuery().GetNearest().GetVariant().(*pb.VectorInput_Sparse)
	return ok
}
