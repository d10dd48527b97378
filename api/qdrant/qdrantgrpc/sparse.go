package qdrantgrpc

import (
	"maps"
	"slices"
	"strings"

	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/vector/sparsevec"
)

// Sparse vectors over gRPC, as over REST (../decode_sparse.go): a
// collection's sparse_vectors_config, a point's named vectors, queries
// using a sparse vector, and answers' named vectors.

// decodeSparseConfig reads a create's sparse_vectors_config.
func decodeSparseConfig(c *pb.SparseVectorConfig) (map[string]catalog.Sparse, error) {
	m := c.GetMap()
	if len(m) == 0 {
		return nil, nil
	}
	if len(m) > catalog.MaxSparseVectors {
		return nil, invalidf("sparse_vectors_config names %d vectors, at most %d", len(m), catalog.MaxSparseVectors)
	}
	out := make(map[string]catalog.Sparse, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		p := m[name]
		where := "sparse_vectors_config." + name
		if err := catalog.ValidName(name); err != nil {
			return nil, invalidf("sparse_vectors_config: the name %q: want 1..%d characters of [A-Za-z0-9_.-]", name, catalog.MaxNameLen)
		}
		sp := catalog.Sparse{Modifier: catalog.ModifierNone}
		switch p.GetModifier() {
		case pb.Modifier_None:
		case pb.Modifier_Idf:
			sp.Modifier = catalog.ModifierIDF
		default:
			return nil, invalidf("%s.modifier %s is not a modifier: want None or Idf", where, p.GetModifier().String())
		}
		if dt := p.GetIndex().GetDatatype(); dt != pb.Datatype_Default && dt != pb.Datatype_Float32 {
			return nil, invalidf("%s.index.datatype %s is not supported: trawl keeps sparse values as float32, and a narrower type would change scores", where, dt.String())
		}
		out[name] = sp
	}
	return out, nil
}

// checkSparse checks a sparse vector off the wire.
func checkSparse(indices []uint32, values []float32, where string) (sparsevec.Vector, error) {
	v := sparsevec.Vector{Indices: indices, Values: values}
	if err := v.Validate(); err != nil {
		return sparsevec.Vector{}, invalidf("%s: %v", where, err)
	}
	return v, nil
}

// sparseOf reads a Vector that must be sparse (its sparse form, or the
// deprecated data with indices).
func sparseOf(v *pb.Vector, where string) (sparsevec.Vector, error) {
	if s, ok := v.GetVector().(*pb.Vector_Sparse); ok {
		return checkSparse(s.Sparse.GetIndices(), s.Sparse.GetValues(), where)
	}
	if v.GetVector() == nil && v.GetIndices() != nil {
		return checkSparse(v.GetIndices().GetData(), v.GetData(), where)
	}
	return sparsevec.Vector{}, invalidf("%s: a sparse vector of the collection, want its indices and values", where)
}

// decodeNamedVectors reads a point's named vectors when the collection
// has sparse vectors: "" is the dense vector (required when dense), the
// others sparse vectors of the collection.
func decodeNamedVectors(named map[string]*pb.Vector, where string, sch coordinator.Schema, dense bool) ([]float32, map[string]sparsevec.Vector, map[string][]float32, error) {
	var (
		vec    []float32
		sp     map[string]sparsevec.Vector
		nameds map[string][]float32
	)
	for _, name := range slices.Sorted(maps.Keys(named)) {
		at := where + "." + name
		if name == "" && sch.Dim > 0 {
			v, err := decodeVector(named[name], where+`[""]`, sch)
			if err != nil {
				return nil, nil, nil, err
			}
			vec = v
			continue
		}
		if vs, ok := sch.ForVector(name); ok && name != "" {
			v, err := decodeVector(named[name], at, vs)
			if err != nil {
				return nil, nil, nil, err
			}
			if nameds == nil {
				nameds = map[string][]float32{}
			}
			nameds[name] = v
			continue
		}
		if _, ok := sch.Sparse[name]; !ok {
			return nil, nil, nil, invalidf("%s: the collection has no vector named %q (its vectors: %s)", where, name, sch.VectorNames())
		}
		v, err := sparseOf(named[name], at)
		if err != nil {
			return nil, nil, nil, err
		}
		if sp == nil {
			sp = map[string]sparsevec.Vector{}
		}
		sp[name] = v
	}
	if vec == nil && dense && sch.Dim > 0 {
		return nil, nil, nil, invalidf(`%s: the dense vector is missing: a trawl point holds one dense vector, named "" in a map of vectors`, where)
	}
	return vec, sp, nameds, nil
}

// decodePointVectors reads a point's Vectors: the unnamed vector, or a
// map of named vectors (the dense one under "", sparse ones by name).
func decodePointVectors(v *pb.Vectors, where string, sch coordinator.Schema, dense bool) ([]float32, map[string]sparsevec.Vector, map[string][]float32, error) {
	if x, ok := v.GetVectorsOptions().(*pb.Vectors_Vectors); ok && (len(sch.Sparse) > 0 || len(sch.Named) > 0) {
		return decodeNamedVectors(x.Vectors.GetVectors(), where, sch, dense)
	}
	if len(sch.Named) > 0 {
		if v == nil {
			return nil, nil, nil, nil // a point without vectors: it holds none
		}
		return nil, nil, nil, invalidf("%s: the collection's vectors are named (%s): give a map of them by name", where, sch.NamedList())
	}
	vec, err := decodeVectors(v, where, sch)
	return vec, nil, nil, err
}

func sparseList(sch coordinator.Schema) string {
	if len(sch.Sparse) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(sch.Sparse)), ", ")
}

// sparseQueryOf is a query by the sparse vector name.
func sparseQueryOf(name string, indices []uint32, values []float32, where string, sch coordinator.Schema) (*coordinator.SparseQuery, error) {
	if _, ok := sch.Sparse[name]; !ok {
		return nil, invalidf("%s: the collection has no sparse vector %q (its sparse vectors: %s)", where, name, sparseList(sch))
	}
	v, err := checkSparse(indices, values, where)
	if err != nil {
		return nil, err
	}
	return &coordinator.SparseQuery{Name: name, Vector: v}, nil
}

// vectorsOutput is a point's vectors as Qdrant answers them: the dense
// vector alone when that is all the point holds (as Qdrant answers a
// point holding only its default vector), else the named map (dense
// under ""); nil when not asked.
func vectorsOutput(sch coordinator.Schema, v []float32, sp map[string]sparsevec.Vector, nameds map[string][]float32) *pb.VectorsOutput {
	if v == nil {
		return nil
	}
	dense := &pb.VectorOutput{Vector: &pb.VectorOutput_Dense{Dense: &pb.DenseVector{Data: v}}}
	if len(sp) == 0 && sch.Dim > 0 {
		return &pb.VectorsOutput{VectorsOptions: &pb.VectorsOutput_Vector{Vector: dense}}
	}
	named := map[string]*pb.VectorOutput{}
	if sch.Dim > 0 {
		named[""] = dense
	}
	for name, x := range nameds {
		named[name] = &pb.VectorOutput{Vector: &pb.VectorOutput_Dense{Dense: &pb.DenseVector{Data: x}}}
	}
	for name, s := range sp {
		named[name] = &pb.VectorOutput{Vector: &pb.VectorOutput_Sparse{Sparse: &pb.SparseVector{Indices: s.Indices, Values: s.Values}}}
	}
	return &pb.VectorsOutput{VectorsOptions: &pb.VectorsOutput_Vectors{Vectors: &pb.NamedVectorsOutput{Vectors: named}}}
}
