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
	"github.com/trawl-search/trawl/vector"
)

// namedSet is a collection of two named dense vectors and no unnamed one.
var namedSet = catalog.Settings{Named: map[string]catalog.Dense{
	"a": {Dim: 3, Metric: vector.Cosine},
	"b": {Dim: 2, Metric: vector.Euclidean, Quantization: catalog.QuantInt8},
}}.Normalize()

func (m *machine) createNamed(name string) *shardpb.CollectionRef {
	m.t.Helper()
	res := m.apply(&shardpb.Command{Op: &shardpb.Command_Catalog{Catalog: &shardpb.ChangeCatalogRequest{
		Authority: true,
		Op:        &shardpb.ChangeCatalogRequest_Create{Create: &shardpb.CollectionEntry{Name: name, Settings: settingsToPB(namedSet)}},
	}}})
	require.NoError(m.t, res.err)
	return &shardpb.CollectionRef{Name: name, Uid: res.catalog.entry.GetUid()}
}

// TestNamedVectorsReplicateAndRestore: upserts carrying named vectors (a
// version-2 entry), a vector update of one name (an edit of version 2)
// and deletes apply; a snapshot carries the named vectors in its rows
// (format 6) and a restore holds them; an entry of a newer upsert
// version, or a named vector of the wrong size in an entry, is refused.
func TestNamedVectorsReplicateAndRestore(t *testing.T) {
	src := newMachine(t, catalog.Settings{Dim: 8})
	ref := src.createNamed("named")
	rng := rand.New(rand.NewPCG(3, 4))
	for b := range 5 {
		up := &shardpb.UpsertCommand{Placement: testPlace, Version: upsertVersionNamed}
		for i := range 40 {
			pv := &shardpb.Vector{Id: fmt.Sprintf("d%d", rng.IntN(90))}
			if i%4 > 0 {
				pv.Named = append(pv.Named, &shardpb.NamedVector{Name: "a", Vector: shard.EncodeVector([]float32{1, float32(b), float32(i)})})
			}
			if i%3 > 0 {
				pv.Named = append(pv.Named, &shardpb.NamedVector{Name: "b", Vector: shard.EncodeVector([]float32{float32(i), -1})})
			}
			up.Vectors = append(up.Vectors, pv)
		}
		require.NoError(t, src.apply(&shardpb.Command{Op: &shardpb.Command_Upsert{Upsert: up}, Collection: ref}).err)
		require.NoError(t, src.apply(&shardpb.Command{Op: &shardpb.Command_Delete{Delete: &shardpb.DeleteCommand{
			Placement: testPlace, Ids: []string{fmt.Sprint("d", rng.IntN(90))}}}, Collection: ref}).err)
	}
	mem, _ := src.cols.Store("named")
	var some string
	for i := range 90 {
		if _, ok := mem.Record(fmt.Sprint("d", i)); ok {
			some = fmt.Sprint("d", i)
			break
		}
	}
	require.NoError(t, src.apply(&shardpb.Command{Op: &shardpb.Command_Edit{Edit: &shardpb.EditCommand{Version: editVersionNamed, Placement: testPlace,
		Edits: []*shardpb.Edit{{Kind: shardpb.EditKind_EDIT_KIND_UPDATE_VECTORS, Vectors: []*shardpb.Vector{{Id: some,
			Named: []*shardpb.NamedVector{{Name: "b", Vector: shard.EncodeVector([]float32{7, 7})}}}}}}}}, Collection: ref}).err)
	r, _ := mem.Record(some)
	require.Equal(t, []float32{7, 7}, r.Named["b"])

	res := src.apply(&shardpb.Command{Op: &shardpb.Command_Upsert{Upsert: &shardpb.UpsertCommand{Placement: testPlace, Version: upsertVersionNamed + 1}},
		Collection: ref})
	require.ErrorContains(t, res.err, "upsert version 3")
	res = src.apply(&shardpb.Command{Op: &shardpb.Command_Upsert{Upsert: &shardpb.UpsertCommand{Placement: testPlace, Version: upsertVersionNamed,
		Vectors: []*shardpb.Vector{{Id: "x", Named: []*shardpb.NamedVector{{Name: "a", Vector: shard.EncodeVector([]float32{1})}}}}}}, Collection: ref})
	require.ErrorContains(t, res.err, "a named vector does not fit")

	snap := src.snapshot()
	dst := newMachine(t, catalog.Settings{Dim: 8})
	_, err := dst.sm.Restore(bytes.NewReader(snap), nil)
	require.NoError(t, err)
	got, _ := dst.cols.Store("named")
	require.Equal(t, mem.Len(), got.Len())
	require.Positive(t, mem.Len())
	for i := range 90 {
		id := fmt.Sprint("d", i)
		ra, oka := mem.Record(id)
		rb, okb := got.Record(id)
		require.Equal(t, oka, okb)
		require.Equal(t, ra.Named, rb.Named, id)
	}
}

func TestCheckNamed(t *testing.T) {
	s := &Server{cfg: Config{Kernel: vector.Generic()}}
	for _, tc := range []struct {
		name string
		in   []*shardpb.NamedVector
		err  string
	}{
		{"ok, sorted by name", []*shardpb.NamedVector{{Name: "b", Vector: shard.EncodeVector([]float32{1, 2})}, {Name: "a", Vector: shard.EncodeVector([]float32{0, 3, 4})}}, ""},
		{"unknown", []*shardpb.NamedVector{{Name: "c"}}, `no named vector "c"`},
		{"twice", []*shardpb.NamedVector{{Name: "b", Vector: shard.EncodeVector([]float32{1, 2})}, {Name: "b", Vector: shard.EncodeVector([]float32{1, 2})}}, `"b" given twice`},
		{"size", []*shardpb.NamedVector{{Name: "a", Vector: shard.EncodeVector([]float32{1, 2})}}, "has 2 dimensions, want 3"},
		{"zero under cosine", []*shardpb.NamedVector{{Name: "a", Vector: shard.EncodeVector([]float32{0, 0, 0})}}, "zero vector"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := s.checkNamed(namedSet, &shardpb.Vector{Named: tc.in}, 3)
			if tc.err == "" {
				require.NoError(t, err)
				require.Equal(t, "a", out[0].GetName())
				v, err := shard.DecodeVector(out[0].GetVector())
				require.NoError(t, err)
				require.InDelta(t, 0.6, v[1], 1e-6) // normalised under cosine
				return
			}
			require.ErrorContains(t, err, tc.err)
		})
	}
	require.ErrorContains(t, checkUnnamed(namedSet, &shardpb.Vector{Vector: shard.EncodeVector([]float32{1})}, 2), "vector 2: the collection has no unnamed vector, only named ones (a, b)")
}
