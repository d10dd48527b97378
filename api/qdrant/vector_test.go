package qdrant

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParseNumberArray: on valid JSON, the fast path either declines or
// agrees exactly with encoding/json's []float64.
func FuzzParseNumberArray(f *testing.F) {
	for _, s := range []string{`[]`, ` [ 1 , -2.5e3,0.1 ] `, `[1,[2]]`, `["a"]`, `[1e999]`, `[-0]`, `[1,]`, `{}`, `null`, `[0.30000000000000004, 5e-324]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return // the decoder never hands UnmarshalJSON invalid JSON
		}
		got, ok := parseNumberArray([]byte(s))
		var want []float64
		err := json.Unmarshal([]byte(s), &want)
		if !ok {
			return
		}
		require.NoError(t, err, "%s", s)
		require.Equal(t, want, got, "%s", s)
	})
}

func TestJSONVectorKeepsOtherValuesRaw(t *testing.T) {
	var v struct {
		V jsonVector `json:"v"`
	}
	require.NoError(t, json.Unmarshal([]byte(`{"v": [1, 2.5]}`), &v))
	require.True(t, v.V.isFloats)
	require.Equal(t, []float64{1, 2.5}, v.V.floats)
	require.NoError(t, json.Unmarshal([]byte(`{"v": {"name": "x"}}`), &v))
	require.False(t, v.V.isFloats)
	require.JSONEq(t, `{"name": "x"}`, string(v.V.raw))
	require.NoError(t, json.Unmarshal([]byte(`{"v": 42}`), &v))
	require.Equal(t, "42", string(v.V.raw))
}
