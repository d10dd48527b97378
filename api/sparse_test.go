package api

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/sparsevec"
)

var sparseSchema = schema{Dim: 2, Metric: vector.DotProduct, Sparse: map[string]catalog.Sparse{"bm": {Modifier: "idf"}}}

func TestDecodeWriteSparse(t *testing.T) {
	recs, err := decodeWrite([]byte(`{"vectors": [{"id": "a", "vector": [1, 2], "sparse": {"bm": {"indices": [3, 1], "values": [0.5, 2]}}},
		{"id": "b", "vector": [1, 0]}]}`), sparseSchema)
	require.NoError(t, err)
	require.Equal(t, map[string]sparsevec.Vector{"bm": {Indices: []uint32{3, 1}, Values: []float32{0.5, 2}}}, recs[0].Sparse)
	require.Nil(t, recs[1].Sparse)
	for _, tc := range []struct{ body, err string }{
		{`{"vectors": [{"id": "a", "vector": [1, 2], "sparse": {"nope": {"indices": [], "values": []}}}]}`,
			`vectors[0].sparse: the collection has no sparse vector "nope"`},
		{`{"vectors": [{"id": "a", "vector": [1, 2], "sparse": {"bm": {"indices": [1, 1], "values": [1, 1]}}}]}`,
			`vectors[0].sparse.bm: indices[1]: 1 repeats an earlier index`},
		{`{"vectors": [{"id": "a", "vector": [1, 2], "sparse": [1]}]}`, `vectors[0].sparse is an array`},
	} {
		_, err := decodeWrite([]byte(tc.body), sparseSchema)
		require.ErrorContains(t, err, tc.err)
	}
}

func TestDecodeSparseQuery(t *testing.T) {
	var q queryJSON
	require.NoError(t, json.Unmarshal([]byte(`{"sparse": {"name": "bm", "indices": [4], "values": [1.5]}, "k": 3}`), &q))
	got, err := q.validate(sparseSchema)
	require.NoError(t, err)
	require.Equal(t, "bm", got.Sparse.Name)
	require.Equal(t, sparsevec.Vector{Indices: []uint32{4}, Values: []float32{1.5}}, got.Sparse.Vector)
	require.Nil(t, got.Vector)
	for _, tc := range []struct{ body, err string }{
		{`{"sparse": {"name": "bm", "indices": [4], "values": [1]}, "vector": [1, 2]}`, `give exactly one of "vector", "vector_b64", "like_id" or "sparse"`},
		{`{"sparse": {"name": "x", "indices": [4], "values": [1]}}`, `sparse.name: the collection has no sparse vector "x"`},
		{`{"sparse": {"indices": [4], "values": [1]}}`, `sparse: missing "name"`},
		{`{"sparse": {"name": "bm", "indices": [4]}}`, `sparse: want both "indices" and "values"`},
	} {
		var q queryJSON
		require.NoError(t, json.Unmarshal([]byte(tc.body), &q))
		_, err := q.validate(sparseSchema)
		require.ErrorContains(t, err, tc.err, tc.body)
	}
}
