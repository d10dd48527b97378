package replica

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/shard/store"
)

// BenchmarkRestore is a replica's start: a 20 000 × 1536 snapshot read back
// into an empty store (the part of a restart that grows with the shard).
func BenchmarkRestore(b *testing.B) {
	const dim, rows = 1536, 20000
	src := store.NewMemory(dim)
	rng := rand.New(rand.NewPCG(1, 2))
	recs := make([]store.Record, 0, 1000)
	for i := range rows {
		v := make([]float32, dim)
		for j := range v {
			v[j] = rng.Float32()
		}
		recs = append(recs, store.Record{ID: fmt.Sprint("row-", i), Vector: v, Payload: []byte(`{"n":1}`)})
		if len(recs) == cap(recs) {
			require.NoError(b, src.Upsert(context.Background(), place, recs))
			recs = recs[:0]
		}
	}
	snap, err := (&fsm{mem: src, log: slog.New(slog.DiscardHandler)}).Snapshot()
	require.NoError(b, err)
	var buf bytes.Buffer
	require.NoError(b, snap.(*fsmSnapshot).persist(&buf))
	snap.Release()
	b.SetBytes(int64(buf.Len()))
	b.ResetTimer()
	for range b.N {
		f := &fsm{mem: store.NewMemory(dim), log: slog.New(slog.DiscardHandler)}
		require.NoError(b, f.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))))
		require.Equal(b, rows, f.mem.Len())
	}
}
