package server

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/shard/store/sparse"
	"github.com/trawl-search/trawl/vector"
)

// createSparse creates a collection with the sparse vector "s" (idf),
// its float32 rows where quant puts them (int8: on disk).
func (m *machine) createSparse(name string, quant string) *shardpb.CollectionRef {
	m.t.Helper()
	set := catalog.Settings{Dim: 2, Metric: vector.DotProduct, Quantization: quant,
		Sparse: map[string]catalog.Sparse{"s": {Modifier: catalog.ModifierIDF}}}.Normalize()
	res := m.apply(&shardpb.Command{Op: &shardpb.Command_Catalog{Catalog: &shardpb.ChangeCatalogRequest{
		Authority: true,
		Op:        &shardpb.ChangeCatalogRequest_Create{Create: &shardpb.CollectionEntry{Name: name, Settings: settingsToPB(set)}},
	}}})
	require.NoError(m.t, res.err)
	return &shardpb.CollectionRef{Name: name, Uid: res.catalog.entry.GetUid()}
}

func randSparsePB(rng *rand.Rand) *shardpb.SparseVector {
	sv := &shardpb.SparseVector{Name: "s"}
	seen := map[uint32]bool{}
	for range rng.IntN(5) + 1 {
		t := uint32(rng.IntN(20))
		if !seen[t] {
			seen[t] = true
			sv.Indices = append(sv.Indices, t)
			sv.Values = append(sv.Values, rng.Float32())
		}
	}
	return sv
}

// sparseAnswers are the store's answers to a fixed set of queries.
func sparseAnswers(t *testing.T, mem *store.Memory) [][]vector.Hit {
	rng := rand.New(rand.NewPCG(9, 9))
	var out [][]vector.Hit
	for range 20 {
		q := randSparsePB(rng)
		require.NoError(t, mem.ViewScan(func(v *store.ScanView) error {
			hits, err := v.SparseSearch(store.SparseQuery{Name: "s", Vector: sparse.Vector{Indices: q.Indices, Values: q.Values}, K: 7}, nil)
			out = append(out, hits)
			return err
		}))
	}
	return out
}

// TestSparseVectorsReplicateAndRestore: upserts carrying sparse vectors
// (a version-1 entry), deletes and overwrites apply; a snapshot carries
// the postings (format 5) and a restore installs them, in a collection
// whose rows are in memory and in one whose rows are segment files; the
// restored replica answers sparse queries and returns sparse vectors as
// the source does. An entry of a newer upsert version is refused.
func TestSparseVectorsReplicateAndRestore(t *testing.T) {
	src := newMachine(t, catalog.Settings{Dim: 8})
	mem := src.createSparse("mem", catalog.QuantNone)
	disk := src.createSparse("disk", catalog.QuantInt8)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, ref := range []*shardpb.CollectionRef{mem, disk} {
		for b := range 4 {
			up := &shardpb.UpsertCommand{Placement: testPlace, Version: upsertVersion}
			for i := range 50 {
				pv := &shardpb.Vector{Id: fmt.Sprintf("d%d", rng.IntN(120)), Vector: shard.EncodeVector([]float32{1, float32(b)})}
				if i%5 > 0 {
					pv.Sparse = []*shardpb.SparseVector{randSparsePB(rng)}
				}
				up.Vectors = append(up.Vectors, pv)
			}
			require.NoError(t, src.apply(&shardpb.Command{Op: &shardpb.Command_Upsert{Upsert: up}, Collection: ref}).err)
			require.NoError(t, src.apply(&shardpb.Command{Op: &shardpb.Command_Delete{Delete: &shardpb.DeleteCommand{
				Placement: testPlace, Ids: []string{"d1", "d2", fmt.Sprint("d", rng.IntN(120))}}}, Collection: ref}).err)
		}
	}
	res := src.apply(&shardpb.Command{Op: &shardpb.Command_Upsert{Upsert: &shardpb.UpsertCommand{Placement: testPlace, Version: upsertVersionNamed + 1}},
		Collection: mem})
	require.ErrorContains(t, res.err, "upsert version 3")

	snap := src.snapshot()
	dst := newMachine(t, catalog.Settings{Dim: 8})
	_, err := dst.sm.Restore(bytes.NewReader(snap), nil)
	require.NoError(t, err)
	for _, name := range []string{"mem", "disk"} {
		a, _ := src.cols.Store(name)
		b, _ := dst.cols.Store(name)
		require.Equal(t, a.Len(), b.Len())
		want := sparseAnswers(t, a)
		require.Equal(t, want, sparseAnswers(t, b), name)
		require.NotEmpty(t, want[0])
		for i := range 120 {
			id := fmt.Sprint("d", i)
			ra, oka := a.Record(id)
			rb, okb := b.Record(id)
			require.Equal(t, oka, okb)
			require.Equal(t, ra.Sparse, rb.Sparse, "%s %s", name, id)
		}
	}
	// A snapshot that links the segment files (as raft's store does)
	// restores the on-disk collection from them, postings included.
	sn, err := src.sm.Snapshot(src.next - 1)
	require.NoError(t, err)
	sink := &linkSink{dir: t.TempDir()}
	require.NoError(t, sn.Persist(sink))
	sn.Release()
	require.NotEmpty(t, sink.names)
	linked := newMachine(t, catalog.Settings{Dim: 8})
	_, err = linked.sm.Restore(bytes.NewReader(sink.Bytes()), linkDir(sink.dir))
	require.NoError(t, err)
	for _, name := range []string{"mem", "disk"} {
		a, _ := src.cols.Store(name)
		b, _ := linked.cols.Store(name)
		require.Equal(t, sparseAnswers(t, a), sparseAnswers(t, b), name)
	}

	// The restored replica's own snapshot restores the same postings.
	again := newMachine(t, catalog.Settings{Dim: 8})
	_, err = again.sm.Restore(bytes.NewReader(dst.snapshot()), nil)
	require.NoError(t, err)
	a, _ := src.cols.Store("mem")
	c, _ := again.cols.Store("mem")
	require.Equal(t, sparseAnswers(t, a), sparseAnswers(t, c))
}

func TestCheckSparse(t *testing.T) {
	set := catalog.Settings{Dim: 2, Sparse: map[string]catalog.Sparse{"s": {}, "t": {}}}.Normalize()
	for _, tc := range []struct {
		name string
		in   []*shardpb.SparseVector
		err  string
	}{
		{"ok, sorted by name", []*shardpb.SparseVector{{Name: "t"}, {Name: "s", Indices: []uint32{1}, Values: []float32{2}}}, ""},
		{"unknown", []*shardpb.SparseVector{{Name: "u"}}, `no sparse vector "u"`},
		{"twice", []*shardpb.SparseVector{{Name: "s"}, {Name: "s"}}, `"s" given twice`},
		{"lengths", []*shardpb.SparseVector{{Name: "s", Indices: []uint32{1}}}, "indices has 1 elements and values 0"},
		{"duplicate index", []*shardpb.SparseVector{{Name: "s", Indices: []uint32{1, 1}, Values: []float32{1, 1}}}, "repeats"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := checkSparse(set, &shardpb.Vector{Sparse: tc.in}, 3)
			if tc.err == "" {
				require.NoError(t, err)
				require.Equal(t, "s", out[0].GetName())
				return
			}
			require.ErrorContains(t, err, tc.err)
			require.ErrorContains(t, err, "vector 3")
		})
	}
}
