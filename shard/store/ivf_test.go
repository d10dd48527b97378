package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/shard/internal/shardtest"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/ivf"
)

func TestParseIndex(t *testing.T) {
	for s, want := range map[string]IndexKind{"": IndexFlat, "flat": IndexFlat, "ivf": IndexIVF} {
		k, err := ParseIndex(s)
		require.NoError(t, err)
		require.Equal(t, want, k)
		require.Equal(t, map[IndexKind]string{IndexFlat: "flat", IndexIVF: "ivf"}[want], k.String())
	}
	_, err := ParseIndex("hnsw")
	require.Error(t, err)
	require.Equal(t, QuantInt8, NewMemory(4, WithIVF(vector.Generic(), vector.Cosine)).Quantization(), "ivf implies int8")
}

func withBuildHook(fn func()) MemoryOption { return func(m *Memory) { m.buildHook = fn } }

// TestIVFBuildBesideWrites: a background build with appends, overwrites
// (of rows the build holds and rows it does not yet) and deletes (moving
// rows into and out of the part it holds, and shrinking the store below
// it) between its chunks swaps in an index whose lists hold exactly the
// rows a fresh build from the same centroids puts there; writes after the
// swap keep it so; the flat codes are dropped.
func TestIVFBuildBesideWrites(t *testing.T) {
	const dim = 16
	g := shardtest.NewClustered(3, dim, 12)
	var mem *Memory
	next := 0
	upsert := func(n int) {
		recs := make([]Record, n)
		for i := range recs {
			recs[i] = Record{ID: fmt.Sprintf("r%05d", next), Vector: g.Vec()}
			next++
		}
		require.NoError(t, mem.Upsert(context.Background(), place, recs))
	}
	overwrite := func(row int) {
		var id string
		require.NoError(t, mem.View(func(r vector.Rows) error { id = r.IDs[row]; return nil }))
		require.NoError(t, mem.Upsert(context.Background(), place, []Record{{ID: id, Vector: g.Vec()}}))
	}
	del := func(row int) {
		var id string
		require.NoError(t, mem.View(func(r vector.Rows) error { id = r.IDs[row]; return nil }))
		found, err := mem.Delete(context.Background(), place, id)
		require.NoError(t, err)
		require.True(t, found)
	}
	chunks := 0
	hook := func() {
		chunks++
		mem.mu.RLock()
		held := mem.ivf.pending.x.Len()
		mem.mu.RUnlock()
		if n := mem.Len(); held > 0 && n > held+1 {
			overwrite(g.IntN(held))          // held by the build
			overwrite(held + g.IntN(n-held)) // not yet
			del(g.IntN(held))                // the last row moves into the build's part
			del(held + g.IntN(mem.Len()-held))
		}
		if chunks == 3 || chunks == 6 {
			// Shrink the store below the build's rows: deletes then move
			// rows the build holds.
			for mem.Len() > held-50 {
				del(g.IntN(mem.Len()))
			}
		}
		if chunks <= 6 {
			upsert(300)
		}
	}
	mem = NewMemory(dim, WithIVF(vector.Generic(), vector.Euclidean), withBuildHook(hook))
	upsert(5000)
	b, err := mem.trainInt8()
	require.NoError(t, err)
	require.NoError(t, mem.SetTrained(TrainedInt8Scale, b, true))
	require.True(t, mem.IndexReady())
	cb, lists, err := mem.trainIVF(context.Background(), 1)
	require.NoError(t, err)
	require.Equal(t, ivf.DefaultLists(5000), lists)
	require.NoError(t, mem.SetTrained(TrainedIVFCentroids, cb, true))
	require.True(t, mem.IndexReady(), "applied while serving: the flat codes serve until the index is built")
	require.False(t, mem.IVFIndexed())

	built, err := mem.BuildIndex(context.Background())
	require.NoError(t, err)
	require.True(t, built)
	require.GreaterOrEqual(t, chunks, 3)
	require.True(t, mem.IVFIndexed())
	require.True(t, mem.Int8Ready())
	require.Nil(t, mem.codes, "the lists hold the codes")
	require.Equal(t, shardtest.FreshLists(t, mem, TrainedIVFCentroids, TrainedInt8Scale), shardtest.ListSets(t, mem))
	built, err = mem.BuildIndex(context.Background())
	require.NoError(t, err)
	require.False(t, built, "nothing to build")

	for range 200 {
		switch g.IntN(3) {
		case 0:
			upsert(1)
		case 1:
			overwrite(g.IntN(mem.Len()))
		default:
			del(g.IntN(mem.Len()))
		}
	}
	require.Equal(t, shardtest.FreshLists(t, mem, TrainedIVFCentroids, TrainedInt8Scale), shardtest.ListSets(t, mem), "writes after the swap keep the lists")

	// A restore (Reset) drops the index; a store restored with centroids
	// committed waits for its build before serving.
	trained := map[string][]byte{TrainedInt8Scale: b, TrainedIVFCentroids: cb}
	mem.Reset(place, trained, 0)
	upsert(2000)
	require.False(t, mem.needsIVFBuild(), "no build while a snapshot is half loaded")
	built, err = mem.BuildIndex(context.Background())
	require.NoError(t, err)
	require.False(t, built)
	require.NoError(t, mem.FinishRestore(context.Background(), nil, nil))
	require.False(t, mem.IndexReady(), "restored: not ready until built")
	require.False(t, mem.Int8Ready())
	built, err = mem.BuildIndex(context.Background())
	require.NoError(t, err)
	require.True(t, built)
	require.True(t, mem.IndexReady())
	require.Equal(t, shardtest.FreshLists(t, mem, TrainedIVFCentroids, TrainedInt8Scale), shardtest.ListSets(t, mem))

	// A snapshot records each row's list; a store restored with them
	// serves from an index built at once, the same lists as a build that
	// assigns every row.
	want := shardtest.ListSets(t, mem)
	v, err := mem.OpenView()
	require.NoError(t, err)
	got := v.IVFLists()
	require.Len(t, got, mem.Len())
	var recs []Record
	require.NoError(t, v.Read(0, v.Len(), func(id string, vec []float32, payload []byte) error {
		recs = append(recs, Record{ID: id, Vector: slices.Clone(vec), Payload: payload})
		return nil
	}))
	v.Close()
	into := NewMemory(dim, WithIVF(vector.Generic(), vector.Euclidean))
	into.Reset(place, trained, len(recs))
	require.NoError(t, into.Upsert(context.Background(), place, recs))
	require.NoError(t, into.FinishRestore(context.Background(), nil, got))
	require.True(t, into.IVFIndexed(), "built from the recorded lists, no background build")
	require.True(t, into.IndexReady())
	require.Equal(t, want, shardtest.ListSets(t, into))
	// Lists of another row count are not used: the store builds as before.
	again := NewMemory(dim, WithIVF(vector.Generic(), vector.Euclidean))
	again.Reset(place, trained, len(recs))
	require.NoError(t, again.Upsert(context.Background(), place, recs))
	require.NoError(t, again.FinishRestore(context.Background(), nil, got[1:]))
	require.False(t, again.IndexReady())

	// Centroids that do not decode leave a flat store, ready.
	require.Error(t, mem.SetTrained(TrainedIVFCentroids, []byte("junk"), true))
	require.True(t, mem.IndexReady())
	require.False(t, mem.needsIVFBuild())
}

// TestIVFDefaultNProbe: a committed nprobe for the built index's
// centroids is what queries without one probe; one naming other
// centroids (a retrain's leftover) is ignored; a value from before levels
// still applies but is measured again; the leader's measurement names the
// built index's centroids, one level for each calibrated k.
func TestIVFDefaultNProbe(t *testing.T) {
	const dim, rows = 16, 4000
	mem := NewMemory(dim, WithIVF(vector.Generic(), vector.Euclidean))
	g := shardtest.NewClustered(5, dim, 10)
	recs := make([]Record, rows)
	for i := range recs {
		recs[i] = Record{ID: fmt.Sprintf("v%04d", i), Vector: g.Vec()}
	}
	require.NoError(t, mem.Upsert(context.Background(), place, recs))
	require.False(t, mem.needsIVFNProbe(), "no index to measure")
	b, err := mem.trainInt8()
	require.NoError(t, err)
	require.NoError(t, mem.SetTrained(TrainedInt8Scale, b, true))
	cb, lists, err := mem.trainIVF(context.Background(), 7)
	require.NoError(t, err)
	require.NoError(t, mem.SetTrained(TrainedIVFCentroids, cb, true))
	require.False(t, mem.needsIVFNProbe(), "no index of the committed centroids yet")
	_, err = mem.BuildIndex(context.Background())
	require.NoError(t, err)
	st := mem.IndexStats()
	require.Equal(t, ivf.DefaultNProbe(lists), st.DefaultNProbe)
	require.False(t, st.NProbeCalibrated, "the rule's value, nothing measured")

	require.True(t, mem.needsIVFNProbe())
	crc := crc32.ChecksumIEEE(cb)
	want := ivf.DefaultNProbe(lists) + 3
	levels := []ivf.Level{{K: 10, NProbe: want}, {K: 100, NProbe: want + 2}}
	require.NoError(t, mem.SetTrained(TrainedIVFNProbe, encodeNProbe(crc, levels), true))
	st = mem.IndexStats()
	require.Equal(t, want, st.DefaultNProbe)
	require.True(t, st.NProbeCalibrated)
	require.False(t, mem.needsIVFNProbe())
	legacy := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, crc), uint32(want))
	require.NoError(t, mem.SetTrained(TrainedIVFNProbe, legacy, true))
	require.Equal(t, want, mem.IndexStats().DefaultNProbe, "a value from before levels still applies")
	require.True(t, mem.needsIVFNProbe(), "and is measured again")
	require.NoError(t, mem.SetTrained(TrainedIVFNProbe, encodeNProbe(crc, levels), true))
	require.NoError(t, mem.SetTrained(TrainedIVFNProbe, encodeNProbe(crc+1, levels), true))
	st = mem.IndexStats()
	require.Equal(t, ivf.DefaultNProbe(lists), st.DefaultNProbe, "other centroids' value")
	require.False(t, st.NProbeCalibrated, "other centroids' value")
	require.True(t, mem.needsIVFNProbe())
	mb, measured, err := mem.calibrateIVF(context.Background())
	require.NoError(t, err)
	gotCRC, got, ok := decodeNProbe(mb)
	require.True(t, ok)
	require.Equal(t, crc, gotCRC)
	require.Len(t, got, len(ivf.CalibrationKs()))
	for i, l := range got {
		require.Equal(t, measured[i].K, l.K)
		require.Equal(t, measured[i].NProbe, l.NProbe)
	}
	require.GreaterOrEqual(t, got[0].NProbe, ivf.DefaultNProbe(lists))
}

// The committed nprobe value round-trips its levels; a value of one
// nprobe (written before levels) applies to every k; anything else is
// refused, so a replica falls back to the rule rather than misread it.
func TestDecodeNProbe(t *testing.T) {
	levels := []ivf.Level{{K: 10, NProbe: 24}, {K: 100, NProbe: 96}}
	for _, tc := range []struct {
		name string
		b    []byte
		want []ivf.Level
	}{
		{"levels", encodeNProbe(7, levels), levels},
		{"one nprobe", binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 7), 30), []ivf.Level{{K: math.MaxInt32, NProbe: 30}}},
		{"short", []byte{7, 0, 0, 0, 1, 0}, nil},
		{"half a level", append(encodeNProbe(7, levels), 1, 0, 0, 0), nil},
		{"descending k", encodeNProbe(7, []ivf.Level{{K: 100, NProbe: 9}, {K: 10, NProbe: 8}}), nil},
		{"zero nprobe", encodeNProbe(7, []ivf.Level{{K: 10, NProbe: 0}}), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			crc, got, ok := decodeNProbe(tc.b)
			if tc.want == nil {
				require.False(t, ok)
				return
			}
			require.True(t, ok)
			require.Equal(t, uint32(7), crc)
			require.Equal(t, tc.want, got)
		})
	}
}
