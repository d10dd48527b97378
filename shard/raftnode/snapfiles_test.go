package raftnode

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// takeSnapshot stores a snapshot whose state is state and which links
// the given files, as a state machine's Persist does.
func takeSnapshot(t *testing.T, s *fileStore, index uint64, state []byte, files map[string]string) string {
	t.Helper()
	sink, err := s.Create(raft.SnapshotVersionMax, index, 1, raft.Configuration{}, 1, nil)
	require.NoError(t, err)
	fs, ok := sink.(*fileSink)
	require.True(t, ok)
	_, err = fs.Write(state)
	require.NoError(t, err)
	for _, name := range []string{"a.npy", "b.npy"} {
		if path, ok := files[name]; ok {
			st, err := os.Stat(path)
			require.NoError(t, err)
			require.NoError(t, fs.Link(path, name, st.Size()))
		}
	}
	require.NoError(t, fs.Close())
	require.NoError(t, fs.Close(), "raft closes the sink Persist closed")
	return sink.ID()
}

func newFileStore(t *testing.T, dir string) *fileStore {
	t.Helper()
	inner, err := raft.NewFileSnapshotStore(dir, snapshotsRetained, hclog.NewNullLogger().StandardWriter(&hclog.StandardLoggerOptions{}))
	require.NoError(t, err)
	return &fileStore{FileSnapshotStore: inner, dir: filepath.Join(dir, "snapshots")}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	return st.Sys().(*syscall.Stat_t).Ino
}

// TestSnapshotFiles: a snapshot with files is one self-contained stream
// of the size its meta says; restored on the replica that took it, its
// files are hard links to the snapshot's (never read from the stream);
// restored elsewhere (a stream received), they are copies of the bytes
// recorded at Link time, even if the file grew since.
func TestSnapshotFiles(t *testing.T) {
	dir := t.TempDir()
	s := newFileStore(t, dir)
	live := t.TempDir()
	a, b := filepath.Join(live, "a"), filepath.Join(live, "b")
	require.NoError(t, os.WriteFile(a, []byte("rows of a"), 0o600))
	require.NoError(t, os.WriteFile(b, []byte("rows of b, more of them"), 0o600))
	id := takeSnapshot(t, s, 10, []byte("state"), map[string]string{"a.npy": a, "b.npy": b})
	// The live file grows after the snapshot: the snapshot holds its
	// first bytes.
	f, err := os.OpenFile(a, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(", appended later")
	require.NoError(t, err)
	require.NoError(t, f.Close())

	meta, rc, err := s.Open(id)
	require.NoError(t, err)
	stream, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	require.Equal(t, meta.Size, int64(len(stream)), "raft checks a sent snapshot's size against its meta")

	t.Run("local", func(t *testing.T) {
		_, rc, err := s.Open(id)
		require.NoError(t, err)
		defer rc.Close()
		state, files, err := restoreFiles(rc, s)
		require.NoError(t, err)
		got, err := io.ReadAll(state)
		require.NoError(t, err)
		require.Equal(t, "state", string(got))
		dst := t.TempDir()
		require.NoError(t, files.Place("b.npy", filepath.Join(dst, "b")))
		require.NoError(t, files.Place("a.npy", filepath.Join(dst, "a")))
		require.Equal(t, inode(t, a), inode(t, filepath.Join(dst, "a")), "linked, not copied")
		require.Equal(t, inode(t, b), inode(t, filepath.Join(dst, "b")))
	})
	t.Run("received", func(t *testing.T) {
		// A follower stores the stream as it arrives, with no files of
		// its own, and restores from it.
		other := newFileStore(t, t.TempDir())
		rid := takeSnapshot(t, other, 10, stream, nil)
		meta, rc, err := other.Open(rid)
		require.NoError(t, err)
		defer rc.Close()
		require.Equal(t, int64(len(stream)), meta.Size)
		state, files, err := restoreFiles(rc, other)
		require.NoError(t, err)
		got, err := io.ReadAll(io.LimitReader(state, 2))
		require.NoError(t, err)
		require.Equal(t, "st", string(got), "the state machine may stop reading early")
		dst := t.TempDir()
		require.Error(t, files.Place("b.npy", filepath.Join(dst, "b")), "out of the stream's order")
		require.NoError(t, files.Place("a.npy", filepath.Join(dst, "a")))
		require.NoError(t, files.Place("b.npy", filepath.Join(dst, "b")))
		for name, want := range map[string]string{"a": "rows of a", "b": "rows of b, more of them"} {
			got, err := os.ReadFile(filepath.Join(dst, name))
			require.NoError(t, err)
			require.Equal(t, want, string(got))
		}
	})
	t.Run("plain", func(t *testing.T) {
		// A snapshot without files is the state alone, as before files.
		id := takeSnapshot(t, s, 11, []byte("just state"), nil)
		_, rc, err := s.Open(id)
		require.NoError(t, err)
		defer rc.Close()
		state, files, err := restoreFiles(rc, s)
		require.NoError(t, err)
		require.Nil(t, files)
		got, err := io.ReadAll(state)
		require.NoError(t, err)
		require.Equal(t, "just state", string(got))
	})
}

// TestSnapshotFilesGoWithTheirSnapshot: raft keeps snapshotsRetained
// snapshots; the links of older ones go with them, so files do not pile
// up however many snapshots are taken.
func TestSnapshotFilesGoWithTheirSnapshot(t *testing.T) {
	dir := t.TempDir()
	s := newFileStore(t, dir)
	a := filepath.Join(t.TempDir(), "a")
	require.NoError(t, os.WriteFile(a, bytes.Repeat([]byte{1}, 100), 0o600))
	for i := range 6 {
		takeSnapshot(t, s, uint64(10+i), []byte("state"), map[string]string{"a.npy": a})
		links, err := filepath.Glob(filepath.Join(dir, "snapshots", "*", filesDir, "*"))
		require.NoError(t, err)
		require.Len(t, links, min(i+1, snapshotsRetained))
	}
	st, err := os.Stat(a)
	require.NoError(t, err)
	require.Equal(t, uint64(1+snapshotsRetained), st.Sys().(*syscall.Stat_t).Nlink)
}
