package server

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protodelim"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/quant"
	"github.com/trawl-search/trawl/vector/segment"
)

// linkSink is a snapshot sink that hard-links files into a directory, as
// raft's snapshot store does; linkDir places them back.
type linkSink struct {
	bytes.Buffer
	dir   string
	names []string
}

func (s *linkSink) Link(path, name string, _ int64) error {
	s.names = append(s.names, name)
	return os.Link(path, filepath.Join(s.dir, name))
}

func (s *linkSink) Links() bool { return true }

type linkDir string

func (d linkDir) Place(name, path string) error { return os.Link(filepath.Join(string(d), name), path) }

// asFormat3 rewrites a format-4 snapshot of one collection as the format
// 3 an older version wrote: the same rows' files, no codes files.
func asFormat3(t *testing.T, snap []byte) []byte {
	t.Helper()
	br := bufio.NewReader(bytes.NewReader(snap))
	var hdr shardpb.SnapshotHeader
	require.NoError(t, protodelim.UnmarshalFrom(br, &hdr))
	require.EqualValues(t, formatCodes, hdr.GetFormat())
	hdr.Format = formatSegments
	var out bytes.Buffer
	require.NoError(t, writeHeader(&out, &hdr))
	var sec shardpb.CollectionHeader
	require.NoError(t, (protodelim.UnmarshalOptions{MaxSize: 512 << 20}).UnmarshalFrom(br, &sec))
	require.NotEmpty(t, sec.GetSegments().GetCodesTag())
	sec.Segments.CodesTag = nil
	for _, f := range sec.GetSegments().GetFiles() {
		require.NotEmpty(t, f.GetCodesName())
		f.CodesName, f.CodesBytes = "", 0
	}
	require.NoError(t, writeHeader(&out, &sec))
	_, err := io.Copy(&out, br)
	require.NoError(t, err)
	return out.Bytes()
}

// TestSnapshotCarriesCodesFiles: an int8 collection on disk is
// snapshotted as format 4, its codes files linked after each rows' file;
// restored from it, a replica holds the same rows and exactly the codes
// encoding them gives. The same snapshot as an older version wrote it
// (format 3, no codes files) restores to the same state, encoding the
// codes; and its next snapshot has codes files again.
func TestSnapshotCarriesCodesFiles(t *testing.T) {
	src := newMachine(t, catalog.Settings{Dim: 8})
	uid := src.create("q", 16, vector.DotProduct, catalog.QuantInt8)
	ref := &shardpb.CollectionRef{Name: "q", Uid: uid}
	src.upsert(ref, 16, 1500, 4)
	mq, _ := src.cols.Store("q")
	require.True(t, mq.OnDisk())
	scale := trainScaleOf(t, mq)
	res := src.apply(&shardpb.Command{Op: &shardpb.Command_SetTrained{SetTrained: &shardpb.SetTrainedCommand{Name: store.TrainedInt8Scale, Value: scale}},
		Collection: ref})
	require.NoError(t, res.err)
	src.upsert(ref, 16, 700, 5) // overwrites, after the scale

	persist := func(m *machine) (*linkSink, []byte) {
		s, err := m.sm.Snapshot(m.next - 1)
		require.NoError(t, err)
		defer s.Release()
		sink := &linkSink{dir: t.TempDir()}
		require.NoError(t, s.Persist(sink))
		return sink, sink.Bytes()
	}
	sink, snap := persist(src)
	var codesLinked int
	for i, name := range sink.names {
		if strings.HasSuffix(name, segment.CodesExt) {
			codesLinked++
			require.True(t, i > 0 && strings.HasSuffix(sink.names[i-1], segment.Ext) &&
				!strings.HasSuffix(sink.names[i-1], segment.CodesExt), "a codes file follows its rows' file")
		}
	}
	require.Positive(t, codesLinked)
	require.Equal(t, len(sink.names), 2*codesLinked, "a codes file for every rows' file")

	wantCat, wantRows, wantTrained := src.state()
	check := func(m *machine) {
		t.Helper()
		cat, rows, trained := m.state()
		require.Equal(t, wantCat.GetCollections(), cat.GetCollections())
		require.Equal(t, wantRows, rows)
		require.Equal(t, wantTrained, trained)
		mem, _ := m.cols.Store("q")
		var s quant.Scale
		require.NoError(t, s.UnmarshalBinary(scale))
		require.NoError(t, mem.ViewCodes(func(r vector.Rows, c *quant.Codes) error {
			require.NotNil(t, c)
			want, err := quant.Encode(s, r)
			require.NoError(t, err)
			for i := range want.Len() {
				require.Equal(t, want.Row(i), c.Row(i), "codes of row %d", i)
				require.Equal(t, want.Norm(i), c.Norm(i), "norm of row %d", i)
			}
			return nil
		}))
	}
	for name, b := range map[string][]byte{"format 4": snap, "format 3": asFormat3(t, snap)} {
		t.Run(name, func(t *testing.T) {
			dst := newMachine(t, catalog.Settings{Dim: 8})
			_, err := dst.sm.Restore(bytes.NewReader(b), linkDir(sink.dir))
			require.NoError(t, err)
			check(dst)
			again, next := persist(dst)
			hdr := shardpb.SnapshotHeader{}
			require.NoError(t, protodelim.UnmarshalFrom(bufio.NewReader(bytes.NewReader(next)), &hdr))
			require.EqualValues(t, formatCodes, hdr.GetFormat(), "the restored replica keeps codes files")
			require.Len(t, again.names, len(sink.names))
		})
	}
}
