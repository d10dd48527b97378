package catalog

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/vector"
)

func TestParseSpec(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Spec
		err  string
	}{
		{in: "notes=384:cosine", want: Spec{Name: "notes", Settings: Settings{Dim: 384, Metric: vector.Cosine, Quantization: QuantNone, Index: IndexFlat, Float32: Float32InMemory}}},
		{in: "img=768:dot:int8", want: Spec{Name: "img", Settings: Settings{Dim: 768, Metric: vector.DotProduct, Quantization: QuantInt8, Index: IndexFlat, Float32: Float32OnDisk}}},
		{in: "big=1536:l2:none:ivf", want: Spec{Name: "big", Settings: Settings{Dim: 1536, Metric: vector.Euclidean, Quantization: QuantInt8, Index: IndexIVF, Float32: Float32OnDisk}}},
		{in: "mem=8:l2:int8:ivf:in_memory", want: Spec{Name: "mem", Settings: Settings{Dim: 8, Metric: vector.Euclidean, Quantization: QuantInt8, Index: IndexIVF, Float32: Float32InMemory}}},
		{in: "disk=8:l2:none:flat:on_disk", want: Spec{Name: "disk", Settings: Settings{Dim: 8, Metric: vector.Euclidean, Quantization: QuantNone, Index: IndexFlat, Float32: Float32OnDisk}}},
		{in: "notes", err: "want NAME=DIM:METRIC"},
		{in: "notes=384", err: "want NAME=DIM:METRIC"},
		{in: "no/tes=384:cosine", err: "only letters"},
		{in: "=384:cosine", err: "1..64 characters"},
		{in: "n=0:cosine", err: "dimension 0"},
		{in: "n=8193:cosine", err: "dimension 8193"},
		{in: "n=x:cosine", err: "not a number"},
		{in: "n=3:manhattan", err: "unknown metric"},
		{in: "n=3:dot:int4", err: `quantization "int4"`},
		{in: "n=3:dot:int8:hnsw", err: `index "hnsw"`},
		{in: "n=3:dot:int8:flat:x", err: `float32 "x"`},
		{in: "n=3:dot:int8:flat:on_disk:x", err: "want NAME=DIM:METRIC"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseSpec(tc.in)
			if tc.err != "" {
				require.ErrorIs(t, err, ErrInvalid)
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestValidName(t *testing.T) {
	require.NoError(t, ValidName("a"))
	require.NoError(t, ValidName("my_docs.v2-en"))
	require.NoError(t, ValidName(strings.Repeat("x", MaxNameLen)))
	require.Error(t, ValidName(strings.Repeat("x", MaxNameLen+1)))
	require.Error(t, ValidName("spaces here"))
	require.Error(t, ValidName("ünïcode"))
}

func TestNormalizeMakesEqualCreatesEqual(t *testing.T) {
	require.Equal(t, Defaults(), Settings{}.Normalize())
	require.Equal(t, Settings{Dim: 8, Index: IndexIVF}.Normalize(), Settings{Dim: 8, Quantization: QuantInt8, Index: IndexIVF}.Normalize())
	// A catalog entry written before the float32 placement existed reads
	// as a create that names none.
	require.Equal(t, Settings{Dim: 8, Quantization: QuantInt8, Float32: Float32OnDisk}.Normalize(), Settings{Dim: 8, Quantization: QuantInt8}.Normalize())
	require.Equal(t, Float32InMemory, Settings{Dim: 8}.Normalize().Float32)
}

func TestSparseSettings(t *testing.T) {
	base := func(sp map[string]Sparse) Settings {
		return Settings{Dim: 4, Metric: vector.Cosine, Sparse: sp}.Normalize()
	}
	for _, tc := range []struct {
		name string
		sp   map[string]Sparse
		err  string
	}{
		{"none", nil, ""},
		{"default modifier", map[string]Sparse{"text": {}}, ""},
		{"idf", map[string]Sparse{"langchain-sparse": {Modifier: ModifierIDF}}, ""},
		{"bad modifier", map[string]Sparse{"text": {Modifier: "bm25"}}, `sparse_vectors.text.modifier "bm25"`},
		{"bad name", map[string]Sparse{"a b": {}}, `vector name "a b"`},
		{"empty name", map[string]Sparse{"": {}}, `vector name ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := base(tc.sp).Validate()
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalid)
			require.ErrorContains(t, err, tc.err)
		})
	}
	// Normalize makes the default modifier explicit and no vectors nil, so
	// creates that mean the same compare Equal.
	require.True(t, base(map[string]Sparse{"text": {}}).Equal(base(map[string]Sparse{"text": {Modifier: ModifierNone}})))
	require.True(t, base(map[string]Sparse{}).Equal(base(nil)))
	require.False(t, base(map[string]Sparse{"text": {}}).Equal(base(map[string]Sparse{"text": {Modifier: ModifierIDF}})))
	require.False(t, base(nil).Equal(base(map[string]Sparse{"text": {}})))
}

func TestNamedSettings(t *testing.T) {
	dense := func(dim int, m vector.Metric) Dense { return Dense{Dim: dim, Metric: m} }
	for _, tc := range []struct {
		name string
		s    Settings
		err  string
	}{
		{"named only", Settings{Named: map[string]Dense{"text": dense(4, vector.Cosine), "image": {Dim: 8, Metric: vector.Euclidean, Quantization: QuantInt8}}}, ""},
		{"named and sparse", Settings{Named: map[string]Dense{"text-dense": dense(4, vector.DotProduct)}, Sparse: map[string]Sparse{"text-sparse": {}}}, ""},
		{"named and unnamed", Settings{Dim: 4, Named: map[string]Dense{"text": dense(4, vector.Cosine)}}, "either one unnamed vector or named ones"},
		{"size zero", Settings{Named: map[string]Dense{"text": dense(0, vector.Cosine)}}, "vectors.text.size 0"},
		{"size too large", Settings{Named: map[string]Dense{"text": dense(MaxDim+1, vector.Cosine)}}, "vectors.text.size 8193"},
		{"bad metric", Settings{Named: map[string]Dense{"text": dense(4, vector.Metric(99))}}, "vectors.text: unknown metric"},
		{"bad quantization", Settings{Named: map[string]Dense{"text": {Dim: 4, Metric: vector.Cosine, Quantization: "pq"}}}, `vectors.text.quantization "pq"`},
		{"bad name", Settings{Named: map[string]Dense{"a b": dense(4, vector.Cosine)}}, `vector name "a b"`},
		{"name clash", Settings{Named: map[string]Dense{"t": dense(4, vector.Cosine)}, Sparse: map[string]Sparse{"t": {}}}, "vectors.t: the name is also a sparse vector's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Normalize().Validate()
			if tc.err == "" {
				require.NoError(t, err)
				require.False(t, tc.s.Normalize().HasUnnamed())
				return
			}
			require.ErrorIs(t, err, ErrInvalid)
			require.ErrorContains(t, err, tc.err)
		})
	}
	many := map[string]Dense{}
	for i := range MaxNamedVectors + 1 {
		many[fmt.Sprintf("v%d", i)] = dense(2, vector.Cosine)
	}
	require.ErrorContains(t, Settings{Named: many}.Normalize().Validate(), "at most 16")
	// A named-only collection keeps Dim 0, and creates that mean the same
	// compare Equal.
	a := Settings{Named: map[string]Dense{"text": dense(4, vector.Cosine)}}.Normalize()
	require.Zero(t, a.Dim)
	require.True(t, a.Equal(Settings{Named: map[string]Dense{"text": {Dim: 4, Metric: vector.Cosine, Quantization: QuantNone}}}.Normalize()))
	require.False(t, a.Equal(Settings{Named: map[string]Dense{"text": dense(5, vector.Cosine)}}.Normalize()))
	require.ErrorContains(t, Changeable(a, Settings{Named: map[string]Dense{"text": dense(5, vector.Cosine)}}), "named vectors")
}
