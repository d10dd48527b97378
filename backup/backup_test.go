package backup

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trawl-search/trawl/vector/quant"
	"github.com/trawl-search/trawl/vector/segment"
)

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := Dir(t.TempDir())
	w := NewWriter(dir, "c/b1")
	sw, err := w.Shard(ctx, "s0", 2, 2)
	require.NoError(t, err)
	require.NoError(t, sw.Add("a", []float32{1, 2}, []byte(`{"k": 1}`)))
	require.NoError(t, sw.Add("b", []float32{3, 4}, nil))
	require.Error(t, sw.Add("c", []float32{5, 6}, nil), "more rows than announced")
	require.NoError(t, sw.Close(7))
	_, err = w.Finish(ctx, Manifest{ID: "b1", Collection: "c", Settings: Settings{Dimension: 2, Metric: "dot"}, Shards: []Shard{sw.Info()}})
	require.NoError(t, err)

	ms, err := List(ctx, dir, "c")
	require.NoError(t, err)
	require.Len(t, ms, 1)
	r, err := Open(ctx, dir, "c/b1")
	require.NoError(t, err)
	require.NoError(t, r.Verify(ctx))
	var got []Row
	require.NoError(t, r.Rows(ctx, r.Manifest.Shards[0], 1, func(rows []Row) error {
		got = append(got, rows...)
		return nil
	}))
	require.Equal(t, []Row{{ID: "a", Vector: []float32{1, 2}, Payload: []byte(`{"k":1}`)}, {ID: "b", Vector: []float32{3, 4}}}, got)
	require.EqualValues(t, 7, r.Manifest.Shards[0].Index)

	// The tar archive carries it whole to another store.
	var buf bytes.Buffer
	require.NoError(t, WriteTar(ctx, dir, "c/b1", &buf))
	other := Dir(t.TempDir())
	require.NoError(t, ReadTar(ctx, bytes.NewReader(buf.Bytes()), other, "x"))
	r2, err := Open(ctx, other, "x")
	require.NoError(t, err)
	require.NoError(t, r2.Verify(ctx))
}

// A damaged file is refused naming it; an archive cannot write a file
// its manifest does not name (nor outside its prefix).
func TestCorruption(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, root string)
		file   string
	}{
		{"bit flip", func(t *testing.T, root string) {
			p := filepath.Join(root, "c/b1/shards/s0/vectors.npy")
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			b[len(b)-1] ^= 1
			require.NoError(t, os.WriteFile(p, b, 0o644))
		}, "shards/s0/vectors.npy"},
		{"truncated", func(t *testing.T, root string) {
			require.NoError(t, os.Truncate(filepath.Join(root, "c/b1/shards/s0/points.jsonl"), 3))
		}, "shards/s0/points.jsonl"},
		{"missing", func(t *testing.T, root string) {
			require.NoError(t, os.Remove(filepath.Join(root, "c/b1/shards/s0/points.jsonl")))
		}, "shards/s0/points.jsonl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir := Dir(root)
			w := NewWriter(dir, "c/b1")
			sw, err := w.Shard(ctx, "s0", 2, 1)
			require.NoError(t, err)
			require.NoError(t, sw.Add("a", []float32{1, 2}, nil))
			require.NoError(t, sw.Close(1))
			_, err = w.Finish(ctx, Manifest{ID: "b1", Collection: "c", Settings: Settings{Dimension: 2, Metric: "dot"}, Shards: []Shard{sw.Info()}})
			require.NoError(t, err)
			tc.damage(t, root)
			r, err := Open(ctx, dir, "c/b1")
			require.NoError(t, err)
			err = r.Verify(ctx)
			require.True(t, IsCorrupt(err), "%v", err)
			require.ErrorContains(t, err, tc.file)
		})
	}

	t.Run("archive with a stray file", func(t *testing.T) {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		man := []byte(`{"format":"trawl-backup","version":1,"settings":{"dimension":2},"shards":[],"files":[]}`)
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: ManifestFile, Mode: 0o644, Size: int64(len(man))}))
		_, _ = tw.Write(man)
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: "../../evil", Mode: 0o644, Size: 1}))
		_, _ = tw.Write([]byte("x"))
		require.NoError(t, tw.Close())
		root := t.TempDir()
		err := ReadTar(ctx, &buf, Dir(filepath.Join(root, "in")), "p")
		require.True(t, IsCorrupt(err), "%v", err)
		require.ErrorContains(t, err, "../../evil")
		_, err = os.Stat(filepath.Join(root, "evil"))
		require.True(t, os.IsNotExist(err))
	})
}

// An int8 collection's backup carries each shard's codes and steps as
// .npy files, checksummed and listed like the rest; Verify checks the
// codes against the rows they encode. A version 1 manifest (no codes)
// still reads.
func TestCodes(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	dir := Dir(root)
	scale, err := quant.Train([]float32{1, -2, 0.5, 4}, 2, quant.PerShard)
	require.NoError(t, err)
	w := NewWriter(dir, "c/b1")
	sw, err := w.Shard(ctx, "s0", 2, 2)
	require.NoError(t, err)
	require.NoError(t, sw.WithCodes(ctx, scale))
	require.NoError(t, sw.Add("a", []float32{1, -2}, nil))
	require.NoError(t, sw.Add("b", []float32{0.5, 4}, nil))
	require.NoError(t, sw.Close(3))
	m, err := w.Finish(ctx, Manifest{ID: "b1", Collection: "c", Settings: Settings{Dimension: 2, Metric: "dot", Quantization: "int8"}, Shards: []Shard{sw.Info()}})
	require.NoError(t, err)
	require.Equal(t, Version, m.Version)
	require.Len(t, m.Files, 4, "rows, points, codes, steps")
	s := m.Shards[0]
	require.Equal(t, "shards/s0/codes.npy", s.Codes)
	require.Equal(t, "shards/s0/steps.npy", s.Steps)
	r, err := Open(ctx, dir, "c/b1")
	require.NoError(t, err)
	require.NoError(t, r.Verify(ctx))

	// The codes file is what numpy reads: its header, then rows × dim int8.
	raw, err := os.ReadFile(filepath.Join(root, "c/b1", s.Codes))
	require.NoError(t, err)
	hdr := segment.Int8NpyHeader(2, 2)
	require.Equal(t, hdr, raw[:len(hdr)])
	want := make([]int8, 2)
	for i, row := range [][]float32{{1, -2}, {0.5, 4}} {
		scale.Encode(want, row)
		for d := range want {
			require.Equal(t, want[d], int8(raw[len(hdr)+2*i+d]), "row %d code %d", i, d)
		}
	}

	// A code that does not encode its row is refused naming the file,
	// even when the manifest's digest was made to match.
	raw[len(hdr)] ^= 0x7f
	require.NoError(t, os.WriteFile(filepath.Join(root, "c/b1", s.Codes), raw, 0o644))
	sum := sha256.Sum256(raw)
	for i, f := range r.Manifest.Files {
		if f.Name == s.Codes {
			r.Manifest.Files[i].SHA256 = hex.EncodeToString(sum[:])
		}
	}
	err = r.Verify(ctx)
	require.True(t, IsCorrupt(err), "%v", err)
	require.ErrorContains(t, err, s.Codes)

	// A version 1 backup (no codes) reads and verifies.
	w1 := NewWriter(dir, "c/old")
	sw1, err := w1.Shard(ctx, "s0", 2, 1)
	require.NoError(t, err)
	require.NoError(t, sw1.Add("a", []float32{1, 2}, nil))
	require.NoError(t, sw1.Close(1))
	_, err = w1.Finish(ctx, Manifest{ID: "old", Collection: "c", Settings: Settings{Dimension: 2, Metric: "dot"}, Shards: []Shard{sw1.Info()}})
	require.NoError(t, err)
	mp := filepath.Join(root, "c/old", ManifestFile)
	b, err := os.ReadFile(mp)
	require.NoError(t, err)
	b = bytes.Replace(b, []byte(`"version": 2`), []byte(`"version": 1`), 1)
	require.NoError(t, os.WriteFile(mp, b, 0o644))
	r1, err := Open(ctx, dir, "c/old")
	require.NoError(t, err)
	require.Equal(t, 1, r1.Manifest.Version)
	require.NoError(t, r1.Verify(ctx))
}
