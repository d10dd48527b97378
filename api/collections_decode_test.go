package api

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/vector"
)

func TestDecodeCreate(t *testing.T) {
	settings := func(dim int, m vector.Metric, q, ix string) catalog.Settings {
		return catalog.Settings{Dim: dim, Metric: m, Quantization: q, Index: ix, Float32: catalog.DefaultFloat32(q)}
	}
	for _, tc := range []struct {
		name, body string
		want       catalog.Settings
		err        string
	}{
		{name: "every member", body: `{"dimension": 768, "metric": "dot", "quantization": "int8", "index": "ivf"}`,
			want: settings(768, vector.DotProduct, "int8", "ivf")},
		{name: "empty body", body: ``, want: catalog.Defaults()},
		{name: "white space", body: " \n\t", want: catalog.Defaults()},
		{name: "empty object", body: `{}`, want: catalog.Defaults()},
		{name: "nulls are defaults", body: `{"dimension": null, "metric": null, "quantization": null, "index": null}`, want: catalog.Defaults()},
		{name: "dimension only", body: `{"dimension": 8}`, want: settings(8, vector.Cosine, "none", "flat")},
		{name: "l2", body: `{"metric": "l2"}`, want: settings(1536, vector.Euclidean, "none", "flat")},
		{name: "ivf implies int8", body: `{"index": "ivf"}`, want: settings(1536, vector.Cosine, "int8", "ivf")},
		{name: "ivf over none", body: `{"quantization": "none", "index": "ivf"}`, want: settings(1536, vector.Cosine, "int8", "ivf")},
		{name: "smallest", body: `{"dimension": 1}`, want: settings(1, vector.Cosine, "none", "flat")},
		{name: "largest", body: `{"dimension": 8192}`, want: settings(8192, vector.Cosine, "none", "flat")},
		{name: "int8 in memory", body: `{"quantization": "int8", "float32": "in_memory"}`,
			want: catalog.Settings{Dim: 1536, Metric: vector.Cosine, Quantization: "int8", Index: "flat", Float32: "in_memory"}},
		{name: "float32 on disk", body: `{"float32": "on_disk"}`,
			want: catalog.Settings{Dim: 1536, Metric: vector.Cosine, Quantization: "none", Index: "flat", Float32: "on_disk"}},
		{name: "float32 unknown", body: `{"float32": "disk"}`, err: `float32 is "disk", want one of "on_disk", "in_memory"`},
		{name: "float32 boolean", body: `{"float32": true}`, err: `float32 is a boolean, want one of "on_disk", "in_memory"`},

		{name: "sparse vectors", body: `{"dimension": 8, "sparse_vectors": {"bm25": {"modifier": "idf"}, "splade": {}, "x": null}}`,
			want: catalog.Settings{Dim: 8, Metric: vector.Cosine, Quantization: "none", Index: "flat", Float32: "in_memory",
				Sparse: map[string]catalog.Sparse{"bm25": {Modifier: "idf"}, "splade": {Modifier: "none"}, "x": {Modifier: "none"}}}},
		{name: "sparse modifier", body: `{"sparse_vectors": {"s": {"modifier": "bm25"}}}`, err: `sparse_vectors.s.modifier is "bm25", want one of "none", "idf"`},
		{name: "sparse member", body: `{"sparse_vectors": {"s": {"index": {}}}}`, err: `sparse_vectors.s: json: unknown field "index"`},
		{name: "sparse name", body: `{"sparse_vectors": {"a/b": {}}}`, err: `sparse_vectors: vector name "a/b"`},
		{name: "sparse array", body: `{"sparse_vectors": ["s"]}`, err: `sparse_vectors is an array, want {"name": {"modifier": "none"|"idf"}, ...}`},
		{name: "unknown member", body: `{"dim": 8}`, err: `bad JSON: json: unknown field "dim"`},
		{name: "qdrant's shape", body: `{"vectors": {"size": 8, "distance": "Dot"}}`, err: `vectors: {"size", "distance"} is Qdrant's shape`},
		{name: "trailing data", body: `{"dimension": 8} {}`, err: "bad JSON: trailing data after the request object"},
		{name: "not an object", body: `[8]`, err: "bad JSON"},
		{name: "not JSON", body: `{dimension: 8}`, err: "bad JSON"},
		{name: "dimension zero", body: `{"dimension": 0}`, err: "dimension is 0, want an integer 1..8192"},
		{name: "dimension too large", body: `{"dimension": 8193}`, err: "dimension is 8193, want an integer 1..8192"},
		{name: "dimension negative", body: `{"dimension": -8}`, err: "dimension is -8, want an integer 1..8192"},
		{name: "dimension fraction", body: `{"dimension": 7.5}`, err: "dimension is 7.5, want an integer 1..8192"},
		{name: "dimension exponent", body: `{"dimension": 8e2}`, err: "dimension is 8e2, want an integer 1..8192"},
		{name: "dimension huge", body: `{"dimension": 123456789012345678901234567890123456789}`,
			err: "dimension is 12345678901234567890123456789012..., want an integer 1..8192"},
		{name: "dimension string", body: `{"dimension": "768"}`, err: "dimension is a string, want an integer 1..8192"},
		{name: "dimension boolean", body: `{"dimension": true}`, err: "dimension is a boolean, want an integer 1..8192"},
		{name: "dimension array", body: `{"dimension": [768]}`, err: "dimension is an array, want an integer 1..8192"},
		{name: "metric unknown", body: `{"metric": "Cosine"}`, err: `metric is "Cosine", want one of "cosine", "dot", "l2"`},
		{name: "metric number", body: `{"metric": 1}`, err: `metric is a number, want one of "cosine", "dot", "l2"`},
		{name: "quantization unknown", body: `{"quantization": "int4"}`, err: `quantization is "int4", want one of "none", "int8"`},
		{name: "quantization object", body: `{"quantization": {"scalar": {}}}`, err: `quantization is an object, want one of "none", "int8"`},
		{name: "index unknown", body: `{"index": "hnsw"}`, err: `index is "hnsw", want one of "flat", "ivf"`},
		{name: "index boolean", body: `{"index": false}`, err: `index is a boolean, want one of "flat", "ivf"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := decodeCreate([]byte(tc.body))
			if tc.err != "" {
				requireRequestError(t, err)
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func FuzzDecodeCreate(f *testing.F) {
	for _, s := range []string{
		`{"dimension": 768, "metric": "dot", "quantization": "int8", "index": "ivf"}`,
		`{"dimension": 1}`, `{"dimension": 8192}`, `{"dimension": 8193}`, `{"dimension": 0}`,
		`{"dimension": 1.0}`, `{"dimension": -1}`, `{"dimension": "8"}`, `{"dimension": 1e400}`,
		`{"metric": "l2"}`, `{"metric": ""}`, `{"metric": null}`, `{"quantization": "none", "index": "ivf"}`,
		`{"index": "ivf"} {}`, `{"extra": 1}`, ``, ` `, `{}`, `null`, `[]`, `{`, `"x"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, _, err := decodeCreate(b)
		if err != nil {
			requireRequestError(t, err)
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("accepted settings that do not validate: %v", err)
		}
		if !s.Equal(s.Normalize()) {
			t.Fatalf("accepted settings not normalized: %+v", s)
		}
	})
}
