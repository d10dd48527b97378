package filter

import "testing"

// BenchmarkParsePayload: one typical payload (the shard benchmarks' five
// keys) through parseTree's fast path and through the token walker alone,
// in the same run.
func BenchmarkParsePayload(b *testing.B) {
	p := []byte(`{"bucket":42,"lang":"de","year":2017,"tags":["t3","t11"],"price":512.07,"title":"Über \u00e9t\u00e9"}`)
	for _, tc := range []struct {
		name  string
		parse func([]byte, path, int, bool) (any, error)
	}{{"parseTree", parseTree}, {"walker", walkTree}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				if _, err := tc.parse(p, path{"payload"}, MaxDepth, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
