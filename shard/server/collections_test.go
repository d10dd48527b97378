package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/raftnode"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/shard/store"
	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/quant"
)

// These tests drive the state machine with log entries directly: what a
// restore does with a snapshot does not depend on how the entries came.
// The replica package tests the same paths over real raft groups.

var testPlace = &shardpb.Placement{Fingerprint: "fp", Shard: "shard-0"}

// machine is a state machine over fresh collections, and the next log
// index to apply at.
type machine struct {
	t    testing.TB
	cols *Collections
	sm   *stateMachine
	next uint64
}

// newMachine's collections placed on disk keep their segments under a
// test directory, so the restore tests cover both placements.
func newMachine(t testing.TB, legacy catalog.Settings) *machine {
	return newMachineWith(t, CollectionsConfig{Legacy: legacy})
}

// newMachineWith is newMachine with more of the collections' config.
func newMachineWith(t testing.TB, cfg CollectionsConfig) *machine {
	cfg.Kernel, cfg.SegmentDir = vector.Generic(), t.TempDir()
	cols := NewCollections(cfg)
	t.Cleanup(cols.Close)
	return &machine{t: t, cols: cols, sm: NewStateMachine(cols, nil, nil).(*stateMachine), next: 1}
}

func (m *machine) apply(cmd *shardpb.Command) applyResult {
	m.t.Helper()
	b, err := proto.Marshal(cmd)
	require.NoError(m.t, err)
	res := m.sm.Apply(raftnode.Entry{Index: m.next, Data: b, Serving: true}).(applyResult)
	m.next++
	return res
}

func (m *machine) create(name string, dim int, metric vector.Metric, quant string) uint64 {
	m.t.Helper()
	res := m.apply(&shardpb.Command{Op: &shardpb.Command_Catalog{Catalog: &shardpb.ChangeCatalogRequest{
		Authority: true,
		Op: &shardpb.ChangeCatalogRequest_Create{Create: &shardpb.CollectionEntry{
			Name: name, Settings: settingsToPB(catalog.Settings{Dim: dim, Metric: metric, Quantization: quant}.Normalize())}},
	}}})
	require.NoError(m.t, res.err)
	return res.catalog.entry.GetUid()
}

// upsert writes n rows of seed to the collection ref names (nil: the
// legacy one).
func (m *machine) upsert(ref *shardpb.CollectionRef, dim, n int, seed uint64) {
	m.t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	up := &shardpb.UpsertCommand{Placement: testPlace}
	for i := range n {
		v := make([]float32, dim)
		for j := range v {
			v[j] = rng.Float32() - 0.5
		}
		up.Vectors = append(up.Vectors, &shardpb.Vector{Id: fmt.Sprint("doc-", i), Vector: shard.EncodeVector(v), Payload: []byte(`{"i":1}`)})
	}
	res := m.apply(&shardpb.Command{Op: &shardpb.Command_Upsert{Upsert: up}, Collection: ref})
	require.NoError(m.t, res.err)
}

// snapshot writes the machine's snapshot.
func (m *machine) snapshot() []byte {
	m.t.Helper()
	s, err := m.sm.Snapshot(m.next - 1)
	require.NoError(m.t, err)
	defer s.Release()
	var buf bytes.Buffer
	require.NoError(m.t, s.Persist(raftnode.Writer(&buf)))
	return buf.Bytes()
}

// state is what a replica holds, for comparing two: the catalog and each
// collection's rows and trained values.
func (m *machine) state() (*shardpb.CatalogResponse, map[string][]store.Record, map[string]map[string][]byte) {
	m.t.Helper()
	cols, cat := m.cols.held()
	rows := map[string][]store.Record{}
	trained := map[string]map[string][]byte{}
	for _, c := range cols {
		v, err := c.mem.OpenView()
		require.NoError(m.t, err)
		var recs []store.Record
		require.NoError(m.t, v.Read(0, v.Len(), func(id string, vec []float32, payload []byte) error {
			recs = append(recs, store.Record{ID: id, Vector: slices.Clone(vec), Payload: payload})
			return nil
		}))
		trained[c.name] = v.Trained()
		v.Close()
		slices.SortFunc(recs, func(a, b store.Record) int {
			switch {
			case a.ID < b.ID:
				return -1
			case a.ID > b.ID:
				return 1
			}
			return 0
		})
		rows[c.name] = recs
	}
	return cat, rows, trained
}

// TestApplyDecodesInBackground: an upsert's entry decode, the decode of
// its vectors and the store's preparation go through the Background
// runner (a thread of lower priority in a replica), and a replica
// applying through it holds exactly what one applying in place does.
func TestApplyDecodesInBackground(t *testing.T) {
	calls := 0
	bg := newMachineWith(t, CollectionsConfig{Background: func(f func()) { calls++; f() }})
	plain := newMachine(t, catalog.Settings{})
	for _, m := range []*machine{bg, plain} {
		m.create("c", 8, vector.Cosine, "int8")
	}
	calls = 0
	for _, m := range []*machine{bg, plain} {
		m.upsert(&shardpb.CollectionRef{Name: "c"}, 8, 40, 3)
	}
	require.Equal(t, 3, calls, "entry decode, vector decode, store preparation")
	wantCat, wantRows, wantTrained := plain.state()
	gotCat, gotRows, gotTrained := bg.state()
	require.True(t, proto.Equal(wantCat, gotCat))
	require.Equal(t, wantRows, gotRows)
	require.Equal(t, wantTrained, gotTrained)

	// A paced catch-up (not serving) does all of it on the pacer's
	// thread, whose CPU the recovery budget is charged.
	calls = 0
	bg.sm.pace = inPlacePacer{}
	bg.sm.Apply(raftnode.Entry{Index: bg.next, Data: mustMarshal(t, &shardpb.Command{Collection: &shardpb.CollectionRef{Name: "c"},
		Op: &shardpb.Command_Upsert{Upsert: &shardpb.UpsertCommand{Placement: testPlace, Vectors: []*shardpb.Vector{
			{Id: "late", Vector: shard.EncodeVector([]float32{1, 2, 3, 4, 5, 6, 7, 8})}}}}})})
	require.Zero(t, calls)
	_, rows, _ := bg.state()
	require.Len(t, rows["c"], 41)
}

// inPlacePacer paces nothing: it runs the work on the calling goroutine.
type inPlacePacer struct{}

func (inPlacePacer) Do(_ context.Context, work func()) error {
	work()
	return nil
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	return b
}

// TestRestoreReplacesEveryCollection: a restore leaves exactly the
// snapshot's catalog, rows and trained values, whatever the replica held
// before: its other collections are dropped, one of the same name but
// another uid is replaced.
func TestRestoreReplacesEveryCollection(t *testing.T) {
	src := newMachine(t, catalog.Settings{Dim: 8})
	a := src.create("a", 4, vector.Euclidean, catalog.QuantNone)
	b := src.create("b", 16, vector.DotProduct, catalog.QuantInt8)
	src.upsert(&shardpb.CollectionRef{Name: "a", Uid: a}, 4, 300, 1)
	src.upsert(&shardpb.CollectionRef{Name: "b", Uid: b}, 16, 1200, 2)
	src.upsert(nil, 8, 50, 3)
	mb, _ := src.cols.Store("b")
	require.True(t, mb.OnDisk(), "an int8 collection's float32 rows are on disk by default")
	sb := trainScaleOf(t, mb)
	res := src.apply(&shardpb.Command{Op: &shardpb.Command_SetTrained{SetTrained: &shardpb.SetTrainedCommand{Name: store.TrainedInt8Scale, Value: sb}},
		Collection: &shardpb.CollectionRef{Name: "b", Uid: b}})
	require.NoError(t, res.err)
	require.True(t, mb.Int8Ready())
	snap := src.snapshot()

	dst := newMachine(t, catalog.Settings{Dim: 8})
	dst.create("x", 4, vector.Cosine, catalog.QuantNone) // not in the snapshot
	dst.create("a", 4, vector.Euclidean, catalog.QuantNone)
	dst.create("a", 4, vector.Euclidean, catalog.QuantNone)
	dst.upsert(&shardpb.CollectionRef{Name: "x"}, 4, 10, 9)
	applied, err := dst.sm.Restore(bytes.NewReader(snap), nil)
	require.NoError(t, err)
	require.Equal(t, src.next-1, applied)

	wantCat, wantRows, wantTrained := src.state()
	gotCat, gotRows, gotTrained := dst.state()
	require.True(t, proto.Equal(wantCat, gotCat), "catalog: want %v, got %v", wantCat, gotCat)
	require.Equal(t, wantRows, gotRows)
	require.Equal(t, wantTrained, gotTrained)
	_, ok := dst.cols.Store("x")
	require.False(t, ok, "a collection the snapshot lacks is dropped")
	got, _ := dst.cols.Store("b")
	require.True(t, got.Int8Ready(), "int8 codes rebuilt from the restored scale")
	require.Same(t, dst.cols.Legacy(), must(dst.cols.Store(shard.LegacyCollection)), "the legacy store object is kept")

	// Written again, the snapshot is the same state.
	again := newMachine(t, catalog.Settings{Dim: 8})
	_, err = again.sm.Restore(bytes.NewReader(dst.snapshot()), nil)
	require.NoError(t, err)
	c2, r2, t2 := again.state()
	require.True(t, proto.Equal(wantCat, c2))
	require.Equal(t, wantRows, r2)
	require.Equal(t, wantTrained, t2)
}

func must[T any](v T, ok bool) T {
	if !ok {
		panic("missing")
	}
	return v
}

// trainScaleOf trains an int8 scale on mem's rows, as a leader's trainer
// would, serialised for a SetTrained entry.
func trainScaleOf(t *testing.T, mem *store.Memory) []byte {
	t.Helper()
	var sc quant.Scale
	require.NoError(t, mem.View(func(r vector.Rows) error {
		var err error
		sc, err = quant.TrainRows(r, r.Len(), quant.DefaultKind)
		return err
	}))
	b, err := sc.MarshalBinary()
	require.NoError(t, err)
	return b
}

// legacySnapshot is a snapshot as a replica wrote it before collections
// (format 0): one store's header, then its rows.
func legacySnapshot(t *testing.T, dim, rows int, placement *shardpb.Placement, applied uint64) []byte {
	t.Helper()
	var buf bytes.Buffer
	_, err := protodelim.MarshalTo(&buf, &shardpb.SnapshotHeader{Dim: uint32(dim), Placement: placement, Count: uint64(rows), AppliedIndex: applied})
	require.NoError(t, err)
	for i := range rows {
		v := make([]float32, dim)
		v[i%dim] = float32(i + 1)
		_, err := protodelim.MarshalTo(&buf, &shardpb.Vector{Id: fmt.Sprint("old-", i), Vector: shard.EncodeVector(v)})
		require.NoError(t, err)
	}
	return buf.Bytes()
}

// TestRestoreOfASnapshotWrittenBeforeCollections: a format-0 snapshot is
// the legacy collection's, created with the Legacy settings and uid 0; one
// of a replica never written holds no collection (as replaying its empty
// log would not create one); one of another dimension is refused.
func TestRestoreOfASnapshotWrittenBeforeCollections(t *testing.T) {
	for _, tc := range []struct {
		name      string
		snapDim   int
		rows      int
		placement *shardpb.Placement
		err       string
		held      bool
	}{
		{name: "written", snapDim: 8, rows: 700, placement: testPlace, held: true},
		{name: "all deleted", snapDim: 8, rows: 0, placement: testPlace, held: true},
		{name: "never written", snapDim: 8},
		{name: "another dimension", snapDim: 16, rows: 3, placement: testPlace, err: "16-dimensional"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMachine(t, catalog.Settings{Dim: 8, Metric: vector.DotProduct})
			m.create("other", 4, vector.Cosine, catalog.QuantNone)
			applied, err := m.sm.Restore(bytes.NewReader(legacySnapshot(t, tc.snapDim, tc.rows, tc.placement, 42)), nil)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.EqualValues(t, 42, applied)
			cat, rows, _ := m.state()
			if !tc.held {
				require.Empty(t, cat.GetCollections())
				return
			}
			require.Len(t, cat.GetCollections(), 1, "the snapshot replaced the whole catalog")
			e := cat.GetCollections()[0]
			require.Equal(t, shard.LegacyCollection, e.GetName())
			require.Zero(t, e.GetUid())
			require.True(t, proto.Equal(settingsToPB(m.cols.LegacySettings()), e.GetSettings()))
			require.Len(t, rows[shard.LegacyCollection], tc.rows)
			require.Equal(t, tc.rows, m.cols.Legacy().Len(), "restored into the legacy store")
			require.Equal(t, store.Placement{Fingerprint: "fp", Shard: "shard-0"}, m.cols.Placement())

			// Entries without a collection go on acting on it, and a
			// format-2 snapshot of it restores the same state.
			m.upsert(nil, 8, 5, 7)
			require.Equal(t, tc.rows+5, m.cols.Legacy().Len())
			again := newMachine(t, catalog.Settings{Dim: 8, Metric: vector.DotProduct})
			_, err = again.sm.Restore(bytes.NewReader(m.snapshot()), nil)
			require.NoError(t, err)
			c1, r1, _ := m.state()
			c2, r2, _ := again.state()
			require.True(t, proto.Equal(c1, c2))
			require.Equal(t, r1, r2)
		})
	}
}

// TestLegacyCollectionIsCreatedByItsFirstEntry: an entry without a
// collection creates the legacy collection (uid 0, the Legacy settings,
// the catalog version unchanged); once it is dropped such entries are
// refused COLLECTION_NOT_FOUND and never bring it back.
func TestLegacyCollectionIsCreatedByItsFirstEntry(t *testing.T) {
	m := newMachine(t, catalog.Settings{Dim: 8})
	cat, _, _ := m.state()
	require.Empty(t, cat.GetCollections())
	m.upsert(nil, 8, 3, 1)
	cat, _, _ = m.state()
	require.Len(t, cat.GetCollections(), 1)
	require.Zero(t, cat.GetVersion(), "creating the legacy collection is not a catalog change")

	res := m.apply(&shardpb.Command{Op: &shardpb.Command_Catalog{Catalog: &shardpb.ChangeCatalogRequest{
		Op: &shardpb.ChangeCatalogRequest_Drop{Drop: &shardpb.CollectionRef{Name: shard.LegacyCollection}}}}})
	require.NoError(t, res.err)
	require.True(t, res.catalog.changed)
	require.Zero(t, m.cols.Legacy().Len(), "the dropped legacy store is emptied")

	b, err := proto.Marshal(&shardpb.Command{Op: &shardpb.Command_Upsert{Upsert: &shardpb.UpsertCommand{Placement: testPlace,
		Vectors: []*shardpb.Vector{{Id: "x", Vector: shard.EncodeVector(make([]float32, 8))}}}}})
	require.NoError(t, err)
	res = m.sm.Apply(raftnode.Entry{Index: m.next, Data: b}).(applyResult)
	var nf *shard.CollectionNotFoundError
	require.ErrorAs(t, shard.FromStatus(res.err), &nf)
	require.Equal(t, codes.FailedPrecondition, status.Code(res.err))
	_, ok := m.cols.Store(shard.LegacyCollection)
	require.False(t, ok)
}

// BenchmarkEmptyCollection reports the memory one empty collection adds
// to a replica (its catalog entry and empty store; an int8 one also its
// trainer's goroutine and ticker), from creating 100 through the log:
//
//	go test -run '^$' -bench BenchmarkEmptyCollection ./shard/server
func BenchmarkEmptyCollection(b *testing.B) {
	for _, tc := range []struct {
		name  string
		quant string
	}{{"flat", catalog.QuantNone}, {"int8", catalog.QuantInt8}} {
		b.Run(tc.name, func(b *testing.B) {
			const n = 100
			set := settingsToPB(catalog.Settings{Quantization: tc.quant}.Normalize())
			entries := make([][]byte, n)
			for i := range entries {
				entries[i], _ = proto.Marshal(&shardpb.Command{Op: &shardpb.Command_Catalog{Catalog: &shardpb.ChangeCatalogRequest{
					Authority: true,
					Op:        &shardpb.ChangeCatalogRequest_Create{Create: &shardpb.CollectionEntry{Name: fmt.Sprintf("collection-%03d", i), Settings: set}},
				}}})
			}
			var perCollection float64
			for b.Loop() {
				cols := NewCollections(CollectionsConfig{Kernel: vector.Generic()})
				cols.startTrainers(func(c *collection) *store.Trainer {
					return store.StartTrainer(c.mem, idleProposer{}, store.TrainerConfig{})
				})
				sm := NewStateMachine(cols, nil, nil)
				before := heapInUse()
				for i, e := range entries {
					if res := sm.Apply(raftnode.Entry{Index: uint64(i + 1), Data: e}).(applyResult); res.err != nil {
						b.Fatal(res.err)
					}
				}
				after := heapInUse()
				perCollection = (float64(after) - float64(before)) / n
				cols.Close()
			}
			b.ReportMetric(perCollection, "bytes/collection")
		})
	}
}

// idleProposer never leads: its trainers only look for work.
type idleProposer struct{}

func (idleProposer) ServingLeader() bool { return false }
func (idleProposer) SetTrained(context.Context, string, []byte) (uint64, error) {
	return 0, errors.New("not the leader")
}

// heapInUse is the heap in use, goroutine stacks included, after a
// collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc + ms.StackInuse
}

// Payload index declarations are decided by the authority and reach the
// other groups as a create of the same uid; they survive a snapshot.
func TestPayloadIndexDeclarationsTravelWithTheEntry(t *testing.T) {
	auth := newMachine(t, catalog.Defaults())
	uid := auth.create("docs", 4, vector.Cosine, catalog.QuantNone)
	change := func(m *machine, authority bool, op *shardpb.ChangeCatalogRequest) applyResult {
		op.Authority = authority
		return m.apply(&shardpb.Command{Op: &shardpb.Command_Catalog{Catalog: op}})
	}
	index := func(field, schema string) *shardpb.ChangeCatalogRequest {
		return &shardpb.ChangeCatalogRequest{Op: &shardpb.ChangeCatalogRequest_PayloadIndex{
			PayloadIndex: &shardpb.PayloadIndex{Collection: "docs", Field: field, Schema: schema}}}
	}
	res := change(auth, true, index("lang", "keyword"))
	require.NoError(t, res.err)
	require.True(t, res.catalog.changed)
	require.Equal(t, map[string]string{"lang": "keyword"}, res.catalog.entry.GetPayloadSchema())
	res = change(auth, true, index("lang", "keyword"))
	require.NoError(t, res.err)
	require.False(t, res.catalog.changed, "a repeat is a no-op")
	require.Equal(t, codes.NotFound, status.Code(change(auth, true, &shardpb.ChangeCatalogRequest{Op: &shardpb.ChangeCatalogRequest_PayloadIndex{
		PayloadIndex: &shardpb.PayloadIndex{Collection: "nope", Field: "x", Schema: "keyword"}}}).err))
	require.Equal(t, codes.InvalidArgument, status.Code(change(auth, false, index("x", "keyword")).err), "only the authority decides")

	// Another group: the create of the same uid carries the declarations.
	other := newMachine(t, catalog.Defaults())
	push := func(e *shardpb.CollectionEntry) applyResult {
		return change(other, false, &shardpb.ChangeCatalogRequest{Op: &shardpb.ChangeCatalogRequest_Create{Create: e}})
	}
	entry := res.catalog.entry
	entry.PayloadSchema = nil
	require.NoError(t, push(entry).err)
	res = change(auth, true, index("year", "integer"))
	require.NoError(t, res.err)
	res = push(res.catalog.entry)
	require.NoError(t, res.err)
	require.True(t, res.catalog.changed)
	require.Equal(t, uid, res.catalog.entry.GetUid())
	require.Equal(t, map[string]string{"lang": "keyword", "year": "integer"}, res.catalog.entry.GetPayloadSchema())

	// Removing one, and a snapshot round trip.
	require.NoError(t, change(auth, true, index("lang", "")).err)
	restored := newMachine(t, catalog.Defaults())
	_, err := restored.sm.Restore(bytes.NewReader(auth.snapshot()), nil)
	require.NoError(t, err)
	cat, _, _ := restored.state()
	require.Len(t, cat.GetCollections(), 1)
	require.Equal(t, map[string]string{"year": "integer"}, cat.GetCollections()[0].GetPayloadSchema())
}

// A data directory written before collections holds its rows as the
// legacy collection (uid 0). A create of that name with the same settings,
// pushed from the authority under a real uid, adopts it, rows and all.
func TestLegacyCollectionIsAdoptedByItsCreate(t *testing.T) {
	legacy := catalog.Settings{Dim: 4, Metric: vector.Euclidean}.Normalize()
	m := newMachine(t, legacy)
	m.upsert(nil, 4, 10, 1)
	res := m.apply(&shardpb.Command{Op: &shardpb.Command_Catalog{Catalog: &shardpb.ChangeCatalogRequest{
		Op: &shardpb.ChangeCatalogRequest_Create{Create: &shardpb.CollectionEntry{Name: shard.LegacyCollection, Uid: 42, Settings: settingsToPB(legacy)}}}}})
	require.NoError(t, res.err)
	require.True(t, res.catalog.changed)
	require.Equal(t, uint64(42), res.catalog.entry.GetUid())
	_, rows, _ := m.state()
	require.Len(t, rows[shard.LegacyCollection], 10, "adopted with its rows")
}

// TestSegmentFilesFollowTheCatalog: a collection on disk has its segment
// files in its own directory, one in memory has none, and a drop removes
// the dropped collection's files; a new Collections over the same
// directory (a restarted replica) removes what an earlier one left.
func TestSegmentFilesFollowTheCatalog(t *testing.T) {
	dir := t.TempDir()
	cols := NewCollections(CollectionsConfig{Kernel: vector.Generic(), SegmentDir: dir})
	m := &machine{t: t, cols: cols, sm: NewStateMachine(cols, nil, nil).(*stateMachine), next: 1}
	files := func() []string {
		t.Helper()
		got, err := filepath.Glob(filepath.Join(dir, "*", "*.npy"))
		require.NoError(t, err)
		for i := range got {
			got[i], _ = filepath.Rel(dir, got[i])
		}
		return got
	}
	disk := m.create("disk", 4, vector.Cosine, catalog.QuantInt8)
	res := m.apply(&shardpb.Command{Op: &shardpb.Command_Catalog{Catalog: &shardpb.ChangeCatalogRequest{
		Authority: true,
		Op: &shardpb.ChangeCatalogRequest_Create{Create: &shardpb.CollectionEntry{
			Name: "mem", Settings: settingsToPB(catalog.Settings{Dim: 4, Quantization: catalog.QuantInt8, Float32: catalog.Float32InMemory}.Normalize())}},
	}}})
	require.NoError(t, res.err)
	m.upsert(&shardpb.CollectionRef{Name: "disk"}, 4, 10, 1)
	m.upsert(&shardpb.CollectionRef{Name: "mem"}, 4, 10, 1)
	require.Equal(t, []string{fmt.Sprintf("disk.%d/000000.npy", disk)}, files())
	require.True(t, must(cols.Store("disk")).OnDisk())
	require.False(t, must(cols.Store("mem")).OnDisk())

	res = m.apply(&shardpb.Command{Op: &shardpb.Command_Catalog{Catalog: &shardpb.ChangeCatalogRequest{
		Authority: true, Op: &shardpb.ChangeCatalogRequest_Drop{Drop: &shardpb.CollectionRef{Name: "disk"}}}}})
	require.NoError(t, res.err)
	cols.stopping.Wait()
	require.Empty(t, files(), "a dropped collection's files are removed")

	m.create("again", 4, vector.Cosine, catalog.QuantInt8)
	m.upsert(&shardpb.CollectionRef{Name: "again"}, 4, 10, 1)
	require.Len(t, files(), 1)
	// The process is killed here; the next one starts over the directory.
	next := NewCollections(CollectionsConfig{Kernel: vector.Generic(), SegmentDir: dir})
	defer next.Close()
	cols.Close()
	require.Empty(t, files(), "files an earlier process left are removed at start")
}
