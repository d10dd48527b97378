package raftnode

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	"github.com/trawl-search/trawl/shard/shardpb"
)

// A snapshot may carry files besides the state machine's stream: the
// state machine links them into the snapshot (SnapshotSink.Link) rather
// than copy their bytes, which is what makes a snapshot of a large store
// cheap. On disk, such a snapshot is raft's FileSnapshotStore directory
// (meta.json, state.bin: the state machine's stream) plus:
//
//	files/NAME  a hard link to each file
//	files.pb    a shardpb.SnapshotFiles: a random token and each file's
//	            name and size, in the order they were linked
//
// Raft reads a snapshot through one stream (Open): to restore it locally,
// and to send it to a follower (InstallSnapshot). So Open makes the
// stream self-contained: the magic, the SnapshotFiles (with the state's
// length), the state, then each file's bytes. A follower stores that
// stream as it receives it (state.bin, no files), and its Open hands it
// back unchanged. Restoring reads the SnapshotFiles first; when its token
// names a snapshot in this replica's own store the files are linked from
// there and never read from the stream (which is opened lazily, so they
// are not read at all), else they are read from the stream in order.
//
// Old snapshots go with their directory when raft reaps it (it keeps
// snapshotsRetained), links included; one cut short by a crash is a .tmp
// directory that openDisk removes.

// filesMagic opens a stream that carries files. A stream without it is
// the state machine's alone (a snapshot taken before snapshots had files,
// or one with none): its first byte is a varint length and its second a
// protobuf tag, never 'R'.
const filesMagic = "TRAWLSNP"

// Snapshot directory entries of a snapshot with files.
const (
	filesDir  = "files"
	filesList = "files.pb"
)

// ErrNoLinks is returned by SnapshotSink.Link when the snapshot store
// keeps no files (a node InMemory, or a plain writer): the state machine
// writes what the file holds into the stream instead.
var ErrNoLinks = errors.New("raftnode: this snapshot store keeps no files")

// SnapshotSink is where a Snapshot writes its state.
type SnapshotSink interface {
	io.Writer
	// Link adds the file at path to the snapshot as name (a base name,
	// unique within the snapshot) without copying it: a hard link. The
	// snapshot holds its first size bytes, which the caller has made
	// durable (fsync) and never changes; the file may grow past them.
	// It returns ErrNoLinks when the store keeps no files.
	Link(path, name string, size int64) error
	// Links reports whether Link can succeed.
	Links() bool
}

// SnapshotFiles is what a restore reads a snapshot's files through.
type SnapshotFiles interface {
	// Place puts the snapshot's file name at path: a hard link to the
	// replica's own snapshot's file, or a copy of its bytes read from the
	// stream (then files must be placed in the order they were linked).
	Place(name, path string) error
}

// Writer is a SnapshotSink that keeps no files (tests, benchmarks, and
// stores that keep the state in the stream).
func Writer(w io.Writer) SnapshotSink { return plainSink{w} }

type plainSink struct{ io.Writer }

func (plainSink) Link(string, string, int64) error { return ErrNoLinks }
func (plainSink) Links() bool                      { return false }

// fileStore is raft's FileSnapshotStore with files (above).
type fileStore struct {
	*raft.FileSnapshotStore
	dir string // the store's snapshots directory
}

// Create implements raft.SnapshotStore.
func (s *fileStore) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.FileSnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	// raft writes the snapshot in NAME.tmp and renames it when done; the
	// links go in there too, so they are renamed, and reaped, with it.
	dir := filepath.Join(s.dir, sink.ID()+".tmp")
	if _, err := os.Stat(dir); err != nil {
		_ = sink.Cancel()
		return nil, fmt.Errorf("snapshot directory: %w", err)
	}
	return &fileSink{SnapshotSink: sink, dir: dir}, nil
}

// Open implements raft.SnapshotStore: the stream is self-contained (see
// above), and its size says so.
func (s *fileStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.FileSnapshotStore.Open(id)
	if err != nil {
		return nil, nil, err
	}
	dir := filepath.Join(s.dir, id)
	list, ok, err := readFilesList(dir)
	if err != nil || !ok {
		if err != nil {
			rc.Close()
		}
		return meta, rc, err
	}
	list.StateBytes = uint64(meta.Size)
	var pre bytes.Buffer
	pre.WriteString(filesMagic)
	if _, err := protodelim.MarshalTo(&pre, list); err != nil {
		rc.Close()
		return nil, nil, err
	}
	size := int64(pre.Len()) + meta.Size
	parts := []io.Reader{&pre, rc}
	for _, f := range list.GetFiles() {
		size += int64(f.GetBytes())
		parts = append(parts, &lazyFile{path: filepath.Join(dir, filesDir, f.GetName()), n: int64(f.GetBytes())})
	}
	m := *meta
	m.Size = size
	return &m, &multiCloser{Reader: io.MultiReader(parts...), parts: parts}, nil
}

// find returns the directory of the stored snapshot with token, "" if
// none.
func (s *fileStore) find(token []byte) string {
	dirs, _ := filepath.Glob(filepath.Join(s.dir, "*", filesList))
	for _, p := range dirs {
		list, ok, err := readFilesList(filepath.Dir(p))
		if err == nil && ok && bytes.Equal(list.GetToken(), token) {
			return filepath.Dir(p)
		}
	}
	return ""
}

func readFilesList(dir string) (*shardpb.SnapshotFiles, bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, filesList))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("snapshot files: %w", err)
	}
	var list shardpb.SnapshotFiles
	if err := proto.Unmarshal(b, &list); err != nil {
		return nil, false, fmt.Errorf("snapshot files %s: %w", dir, err)
	}
	return &list, true, nil
}

// fileSink is a FileSnapshotSink that links files.
type fileSink struct {
	raft.SnapshotSink
	dir   string
	files []*shardpb.SnapshotFile
	// closed: raft closes a sink after Persist, which closes it too.
	closed bool
}

// Link implements SnapshotSink.
func (s *fileSink) Link(path, name string, size int64) error {
	if name != filepath.Base(name) || name == "." || name == ".." {
		return fmt.Errorf("snapshot file name %q", name)
	}
	if len(s.files) == 0 {
		if err := os.Mkdir(filepath.Join(s.dir, filesDir), 0o750); err != nil {
			return fmt.Errorf("snapshot files: %w", err)
		}
	}
	if err := os.Link(path, filepath.Join(s.dir, filesDir, name)); err != nil {
		return fmt.Errorf("link snapshot file: %w", err)
	}
	s.files = append(s.files, &shardpb.SnapshotFile{Name: name, Bytes: uint64(size)})
	return nil
}

// Links implements SnapshotSink.
func (s *fileSink) Links() bool { return true }

// Close implements raft.SnapshotSink: the list of files, and the
// directory entries of the links, are durable before raft counts the
// snapshot as taken.
func (s *fileSink) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	if len(s.files) > 0 {
		token := make([]byte, 16)
		_, _ = rand.Read(token)
		b, err := proto.Marshal(&shardpb.SnapshotFiles{Token: token, Files: s.files})
		if err == nil {
			err = writeSynced(filepath.Join(s.dir, filesList), b)
		}
		if err == nil {
			err = syncDir(filepath.Join(s.dir, filesDir))
		}
		if err == nil {
			err = syncDir(s.dir)
		}
		if err != nil {
			_ = s.Cancel()
			return fmt.Errorf("snapshot files: %w", err)
		}
	}
	return s.SnapshotSink.Close()
}

func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// lazyFile reads the first n bytes of a file, opened at the first read:
// a local restore never reads the files, so never opens them.
type lazyFile struct {
	path string
	n    int64
	f    *os.File
	r    io.Reader
}

func (l *lazyFile) Read(p []byte) (int, error) {
	if l.r == nil {
		f, err := os.Open(l.path)
		if err != nil {
			return 0, err
		}
		l.f, l.r = f, io.LimitReader(f, l.n)
	}
	n, err := l.r.Read(p)
	if errors.Is(err, io.EOF) && n == 0 {
		if rem := l.r.(*io.LimitedReader).N; rem > 0 {
			return 0, fmt.Errorf("snapshot file %s: %d bytes short", l.path, rem)
		}
	}
	return n, err
}

type multiCloser struct {
	io.Reader
	parts []io.Reader
}

func (m *multiCloser) Close() error {
	var err error
	for _, p := range m.parts {
		switch c := p.(type) {
		case io.Closer:
			err = errors.Join(err, c.Close())
		case *lazyFile:
			if c.f != nil {
				err = errors.Join(err, c.f.Close())
			}
		}
	}
	return err
}

// restoreFiles splits a snapshot stream into the state machine's stream
// and its files; files is nil when the stream carries none.
func restoreFiles(r io.Reader, store *fileStore) (state io.Reader, files *streamFiles, err error) {
	br := bufio.NewReaderSize(r, 1<<20)
	head, err := br.Peek(len(filesMagic))
	if err != nil || string(head) != filesMagic {
		// Short or without the magic: the state machine's alone (it
		// reports a short stream itself).
		return br, nil, nil
	}
	_, _ = br.Discard(len(filesMagic))
	var list shardpb.SnapshotFiles
	if err := (protodelim.UnmarshalOptions{MaxSize: 64 << 20}).UnmarshalFrom(br, &list); err != nil {
		return nil, nil, fmt.Errorf("snapshot files: %w", err)
	}
	st := &io.LimitedReader{R: br, N: int64(list.GetStateBytes())}
	files = &streamFiles{r: br, state: st, list: list.GetFiles()}
	if store != nil {
		if dir := store.find(list.GetToken()); dir != "" {
			files.local = filepath.Join(dir, filesDir)
		}
	}
	return st, files, nil
}

// streamFiles places a snapshot's files (SnapshotFiles).
type streamFiles struct {
	r     io.Reader
	state *io.LimitedReader
	list  []*shardpb.SnapshotFile
	// local is the directory of this replica's own links, "" when the
	// files come from the stream.
	local string
	next  int // the next file in the stream
}

// Place implements SnapshotFiles.
func (s *streamFiles) Place(name, path string) error {
	var want *shardpb.SnapshotFile
	for _, f := range s.list {
		if f.GetName() == name {
			want = f
		}
	}
	if want == nil {
		return fmt.Errorf("snapshot has no file %q", name)
	}
	if s.local != "" {
		src := filepath.Join(s.local, name)
		st, err := os.Stat(src)
		if err != nil {
			return fmt.Errorf("snapshot file: %w", err)
		}
		if st.Size() < int64(want.GetBytes()) {
			return fmt.Errorf("snapshot file %s: %d bytes, %d linked", src, st.Size(), want.GetBytes())
		}
		return os.Link(src, path)
	}
	if s.next >= len(s.list) || s.list[s.next].GetName() != name {
		return fmt.Errorf("snapshot file %q placed out of the stream's order", name)
	}
	s.next++
	// What the state machine left of its stream is not its to read.
	if _, err := io.Copy(io.Discard, s.state); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("snapshot file: %w", err)
	}
	n, err := io.Copy(f, io.LimitReader(s.r, int64(want.GetBytes())))
	if err == nil && n != int64(want.GetBytes()) {
		err = fmt.Errorf("snapshot file %q: %d of %d bytes", name, n, want.GetBytes())
	}
	return errors.Join(err, f.Close())
}
