package replica

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/raftnode"
	"github.com/trawl-search/trawl/shard/server"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector"
)

// BenchmarkRestore is a replica's start: a 20 000 × 1536 snapshot, written
// by the state machine of a store its log filled, read back by a fresh
// state machine into an empty store (the part of a restart that grows
// with the shard), with the float32 rows restored into memory and into
// segment files on disk.
func BenchmarkRestore(b *testing.B) {
	for _, place := range []string{catalog.Float32InMemory, catalog.Float32OnDisk} {
		b.Run("float32="+place, func(b *testing.B) { benchRestore(b, place) })
	}
}

func benchRestore(b *testing.B, place32 string) {
	const dim, rows, batch = 1536, 20000, 1000
	legacy := catalog.Settings{Dim: dim, Float32: place32}
	cols := server.NewCollections(server.CollectionsConfig{Legacy: legacy, Kernel: vector.Generic()})
	src := cols.Legacy()
	sm := server.NewStateMachine(cols, nil, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	var index uint64
	up := &shardpb.UpsertCommand{Placement: &shardpb.Placement{Fingerprint: place.Fingerprint, Shard: place.Shard}}
	for i := range rows {
		v := make([]float32, dim)
		for j := range v {
			v[j] = rng.Float32()
		}
		up.Vectors = append(up.Vectors, &shardpb.Vector{Id: fmt.Sprint("row-", i), Vector: shard.EncodeVector(v), Payload: []byte(`{"n":1}`)})
		if len(up.Vectors) == batch {
			data, err := proto.Marshal(&shardpb.Command{Op: &shardpb.Command_Upsert{Upsert: up}})
			require.NoError(b, err)
			index++
			sm.Apply(raftnode.Entry{Index: index, Data: data})
			up.Vectors = up.Vectors[:0]
		}
	}
	require.Equal(b, rows, src.Len())
	snap, err := sm.Snapshot(index)
	require.NoError(b, err)
	var buf bytes.Buffer
	require.NoError(b, snap.Persist(raftnode.Writer(&buf)))
	snap.Release()
	b.SetBytes(int64(buf.Len()))
	b.ResetTimer()
	for range b.N {
		into := server.NewCollections(server.CollectionsConfig{Legacy: legacy, Kernel: vector.Generic(), SegmentDir: b.TempDir()})
		mem := into.Legacy()
		require.Equal(b, place32 == catalog.Float32OnDisk, mem.OnDisk())
		applied, err := server.NewStateMachine(into, nil, nil).Restore(bytes.NewReader(buf.Bytes()), nil)
		require.NoError(b, err)
		require.Equal(b, index, applied)
		require.Equal(b, rows, mem.Len())
		require.NoError(b, mem.Close())
	}
}
