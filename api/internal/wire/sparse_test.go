package wire

import (
	"errors"
	"math"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/vector/sparsevec"
)

func TestDecodeSparse(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       sparsevec.Vector
		err        string
	}{
		{name: "ok", body: `{"indices": [7, 0, 4294967295], "values": [0.5, -1, 3e38]}`,
			want: sparsevec.Vector{Indices: []uint32{7, 0, math.MaxUint32}, Values: []float32{0.5, -1, 3e38}}},
		{name: "empty", body: `{"indices": [], "values": []}`, want: sparsevec.Vector{Indices: []uint32{}, Values: []float32{}}},
		{name: "missing values", body: `{"indices": [1]}`, err: `q: want both "indices" and "values"`},
		{name: "unknown member", body: `{"indices": [1], "values": [1], "weights": [1]}`, err: `q: json: unknown field "weights"`},
		{name: "negative index", body: `{"indices": [-1], "values": [1]}`, err: "q.indices[0] is -1, want a whole number in 0..4294967295"},
		{name: "index too large", body: `{"indices": [4294967296], "values": [1]}`, err: "q.indices[0] is 4294967296"},
		{name: "fractional index", body: `{"indices": [1.5], "values": [1]}`, err: "q.indices[0] is 1.5"},
		{name: "value beyond float32", body: `{"indices": [1], "values": [1e39]}`, err: "q.values[0] is 1e39, want a finite float32"},
		{name: "string value", body: `{"indices": [1], "values": ["x"]}`, err: "q: json:"},
		{name: "lengths", body: `{"indices": [1, 2], "values": [1]}`, err: "q: indices has 2 elements and values 1"},
		{name: "repeated index", body: `{"indices": [3, 3], "values": [1, 2]}`, err: "q: indices[1]: 3 repeats an earlier index"},
		{name: "not an object", body: `[1]`, err: "q: json: cannot unmarshal array"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeSparse([]byte(tc.body), "q")
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				var we *Error
				require.True(t, errors.As(err, &we))
				require.Equal(t, http.StatusBadRequest, we.Status)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// FuzzDecodeSparse: any body decodes to a valid sparse vector or a 400,
// never a panic.
func FuzzDecodeSparse(f *testing.F) {
	for _, s := range []string{`{"indices": [1, 2], "values": [0.5, 1]}`, `{"indices": [], "values": []}`,
		`{"indices": [1, 1], "values": [1, 1]}`, `{"indices": [1e2], "values": [-0]}`, `{"values": [1]}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := DecodeSparse(b, "q")
		if err != nil {
			var we *Error
			if !errors.As(err, &we) || we.Status != http.StatusBadRequest || we.Msg == "" {
				t.Fatalf("error %v is not a 400", err)
			}
			return
		}
		if err := v.Validate(); err != nil {
			t.Fatalf("accepted an invalid vector: %v", err)
		}
		for i, x := range v.Values {
			if math.IsInf(float64(x), 0) || math.IsNaN(float64(x)) {
				t.Fatalf("value %d is %v", i, x)
			}
		}
	})
}
