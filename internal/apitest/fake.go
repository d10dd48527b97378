package apitest

import (
	"context"
	"fmt"
	"math"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/trawl-search/trawl/api/apikey"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/idorder"
	"github.com/trawl-search/trawl/internal/app"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector"
)

// FakeConfig shapes a router over fake replicas (NewFake).
type FakeConfig struct {
	// Shards is how many fake shards, one replica each (3 if zero).
	Shards int
	// Keys is the router's keyring; nil: the API is open.
	Keys *apikey.Keyring
	// Collection is the router's default collection (--collection).
	Collection string
	// Collections are created through the router before it turns ready
	// (--ensure-collection).
	Collections []catalog.Spec
	// BuiltinDeadline is Config.BuiltinDeadline.
	BuiltinDeadline bool
}

// NewFake starts a router over fake replicas: one in-process gRPC server
// per shard that keeps its group's catalog and its collections' documents
// in memory, with the catalog rules of a real group (the authority
// assigns uids and refuses a conflicting create; the others apply its
// decisions) and brute-force searches. It is for tests of the HTTP
// surface — answer shapes, statuses, key scopes — that do not need
// consensus, durability or real scans; Env.DC is nil. Env.Fakes are the
// shards, in name order (shard-0 is the catalog's authority).
func NewFake(t testing.TB, cfg FakeConfig) *Env {
	t.Helper()
	if cfg.Shards == 0 {
		cfg.Shards = 3
	}
	var specs []app.ShardSpec
	var fakes []*FakeShard
	for i := range cfg.Shards {
		f := startFake(t, fmt.Sprintf("shard-%d", i))
		fakes = append(fakes, f)
		specs = append(specs, app.ShardSpec{Name: f.Name, Addrs: []string{f.addr}})
	}
	r, err := app.New(app.Config{Shards: specs, CatalogRefresh: time.Hour, Keys: cfg.Keys, Collection: cfg.Collection,
		EnsureCollections: cfg.Collections, WarmupTimeout: 5 * time.Second, DisableProber: true, Budget: budgetFor(cfg.BuiltinDeadline)})
	require.NoError(t, err)
	t.Cleanup(r.Close)
	e := serve(t, r)
	e.Fakes = fakes
	return e
}

// FakeShard is one fake shard (NewFake): a group of one replica.
type FakeShard struct {
	shardpb.UnimplementedShardServer
	Name string
	addr string

	mu      sync.Mutex
	index   uint64 // the group's log index
	version uint64 // index of the last catalog change
	colls   map[string]*fakeColl
	aliases map[string]*shardpb.AliasEntry
	dropped map[string]uint64
	// holdBack: the group refuses what the authority pushes to it, as an
	// unreachable group would (HoldBack).
	holdBack bool
	// searchCode and searchDelay script its searches (SearchFault).
	searchCode  codes.Code
	searchDelay time.Duration
}

type fakeColl struct {
	entry *shardpb.CollectionEntry
	docs  map[string]*shardpb.Vector
}

func startFake(t testing.TB, name string) *FakeShard {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &FakeShard{Name: name, addr: ln.Addr().String(), colls: map[string]*fakeColl{},
		aliases: map[string]*shardpb.AliasEntry{}, dropped: map[string]uint64{}}
	srv := grpc.NewServer()
	shardpb.RegisterShardServer(srv, f)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return f
}

// HoldBack makes the shard refuse (true) or take (false) the catalog
// changes the router pushes from the authority: a create then stays
// "creating" until it is let go and the create is repeated.
func (f *FakeShard) HoldBack(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holdBack = on
}

// SearchFault scripts the shard's searches: each waits delay (or until
// its deadline, whichever comes first), then fails with code, or answers
// as usual when code is codes.OK. SearchFault(codes.OK, 0) restores it.
func (f *FakeShard) SearchFault(code codes.Code, delay time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.searchCode, f.searchDelay = code, delay
}

// Put stores documents in a collection the shard holds, as if written.
func (f *FakeShard) Put(t testing.TB, collection string, vs ...*shardpb.Vector) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.colls[collection]
	require.True(t, ok, "shard %s holds no collection %s", f.Name, collection)
	for _, v := range vs {
		c.docs[v.GetId()] = v
	}
}

func (f *FakeShard) Catalog(context.Context, *shardpb.CatalogRequest) (*shardpb.CatalogResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &shardpb.CatalogResponse{Version: f.version, Dropped: map[string]uint64{}}
	for _, c := range f.colls {
		out.Collections = append(out.Collections, c.entry)
	}
	sort.Slice(out.Collections, func(i, j int) bool { return out.Collections[i].GetName() < out.Collections[j].GetName() })
	for _, a := range f.aliases {
		out.Aliases = append(out.Aliases, a)
	}
	sort.Slice(out.Aliases, func(i, j int) bool { return out.Aliases[i].GetAlias() < out.Aliases[j].GetAlias() })
	for n, uid := range f.dropped {
		out.Dropped[n] = uid
	}
	return out, nil
}

func (f *FakeShard) ChangeCatalog(_ context.Context, req *shardpb.ChangeCatalogRequest) (*shardpb.ChangeCatalogResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.holdBack && !req.GetAuthority() {
		return nil, status.Error(codes.Unavailable, "fake shard holding catalog changes back")
	}
	f.index++
	resp := &shardpb.ChangeCatalogResponse{Index: f.index}
	switch op := req.GetOp().(type) {
	case *shardpb.ChangeCatalogRequest_Create:
		want := op.Create
		held, ok := f.colls[want.GetName()]
		switch {
		case req.GetAuthority() && ok:
			if !proto.Equal(held.entry.GetSettings(), want.GetSettings()) {
				return nil, status.Errorf(codes.AlreadyExists, "held with settings %v", held.entry.GetSettings())
			}
			resp.Entry = held.entry
			return resp, nil
		case req.GetAuthority():
			want = &shardpb.CollectionEntry{Name: want.GetName(), Uid: f.index, Settings: want.GetSettings(), SlotMap: want.GetSlotMap()}
		case ok && held.entry.GetUid() == want.GetUid() && want.GetSettingsVersion() > held.entry.GetSettingsVersion():
			held.entry = want // a settings change the authority decided
			resp.Entry, resp.Changed = want, true
			f.version = f.index
			return resp, nil
		case ok && held.entry.GetUid() == want.GetUid():
			resp.Entry = held.entry
			return resp, nil
		case ok && held.entry.GetUid() > want.GetUid(), want.GetUid() <= f.dropped[want.GetName()]:
			return nil, status.Error(codes.FailedPrecondition, "a newer incarnation is held or this one was dropped")
		}
		f.colls[want.GetName()] = &fakeColl{entry: want, docs: map[string]*shardpb.Vector{}}
		resp.Entry, resp.Changed = want, true
	case *shardpb.ChangeCatalogRequest_Drop:
		held, ok := f.colls[op.Drop.GetName()]
		if ok && (req.GetAuthority() || held.entry.GetUid() <= op.Drop.GetUid()) {
			delete(f.colls, op.Drop.GetName())
			f.dropped[op.Drop.GetName()] = held.entry.GetUid()
			resp.Entry, resp.Changed = held.entry, true
		}
	case *shardpb.ChangeCatalogRequest_UpdateSettings:
		// The settings are taken as asked: the real shard's checks are
		// its own tests'.
		held, ok := f.colls[op.UpdateSettings.GetCollection()]
		if !ok {
			return nil, status.Error(codes.NotFound, "no such collection")
		}
		e := proto.Clone(held.entry).(*shardpb.CollectionEntry)
		if proto.Equal(e.GetSettings(), op.UpdateSettings.GetSettings()) {
			resp.Entry = held.entry
			return resp, nil
		}
		e.Settings, e.SettingsVersion = op.UpdateSettings.GetSettings(), f.index
		held.entry = e
		resp.Entry, resp.Changed = e, true
	case *shardpb.ChangeCatalogRequest_Alias:
		a := proto.Clone(op.Alias).(*shardpb.AliasEntry)
		if req.GetAuthority() {
			a.Uid = f.index
		}
		if a.GetCollection() == "" {
			delete(f.aliases, a.GetAlias())
		} else {
			f.aliases[a.GetAlias()] = a
		}
		resp.Alias, resp.Changed = a, true
	}
	f.version = f.index
	return resp, nil
}

// coll is the collection a request names; the COLLECTION_NOT_FOUND
// refusal when the shard holds no such incarnation. Called under mu.
func (f *FakeShard) coll(ref *shardpb.CollectionRef) (*fakeColl, error) {
	name := ref.GetName()
	if name == "" {
		name = shard.LegacyCollection
	}
	c, ok := f.colls[name]
	if !ok {
		return nil, shard.CollectionNotFoundStatus(name, 0)
	}
	if ref.GetUid() != 0 && ref.GetUid() != c.entry.GetUid() {
		return nil, shard.CollectionNotFoundStatus(name, c.entry.GetUid())
	}
	return c, nil
}

func (c *fakeColl) stats() *shardpb.CollectionStats {
	var bytes uint64
	for _, v := range c.docs {
		bytes += uint64(len(v.GetVector()) + len(v.GetPayload()))
	}
	kind := c.entry.GetSettings().GetIndex()
	return &shardpb.CollectionStats{Entry: c.entry, DocCount: uint64(len(c.docs)), Bytes: bytes,
		Index: &shardpb.IndexStats{Kind: kind, State: "ready", Rows: uint64(len(c.docs))}}
}

func (f *FakeShard) Stats(_ context.Context, req *shardpb.StatsRequest) (*shardpb.StatsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &shardpb.StatsResponse{Kernel: "generic", Role: "leader", Serving: true, CommitIndex: f.index,
		AppliedIndex: f.index, CatalogVersion: f.version}
	if req.GetCollection() != nil {
		c, err := f.coll(req.GetCollection())
		if err != nil {
			return nil, err
		}
		out.Collections = []*shardpb.CollectionStats{c.stats()}
	} else {
		for _, c := range f.colls {
			out.Collections = append(out.Collections, c.stats())
		}
		slices.SortFunc(out.Collections, func(a, b *shardpb.CollectionStats) int {
			return strings.Compare(a.GetEntry().GetName(), b.GetEntry().GetName())
		})
	}
	for _, c := range out.Collections {
		out.DocCount += c.GetDocCount()
	}
	return out, nil
}

func (f *FakeShard) Upsert(_ context.Context, req *shardpb.UpsertRequest) (*shardpb.UpsertResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.coll(req.GetCollection())
	if err != nil {
		return nil, err
	}
	for _, v := range req.GetVectors() {
		c.docs[v.GetId()] = v
	}
	f.index++
	return &shardpb.UpsertResponse{DocCount: uint64(len(c.docs)), Index: f.index}, nil
}

func (f *FakeShard) Get(_ context.Context, req *shardpb.GetRequest) (*shardpb.GetResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.coll(req.GetCollection())
	if err != nil {
		return nil, err
	}
	v, ok := c.docs[req.GetId()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no document %q", req.GetId())
	}
	return &shardpb.GetResponse{Vector: v}, nil
}

func (f *FakeShard) Delete(_ context.Context, req *shardpb.DeleteRequest) (*shardpb.DeleteResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.coll(req.GetCollection())
	if err != nil {
		return nil, err
	}
	f.index++
	_, found := c.docs[req.GetId()]
	delete(c.docs, req.GetId())
	return &shardpb.DeleteResponse{Found: found, Index: f.index}, nil
}

// Scroll lists a page of the collection's documents in id order and
// counts them all; filters are not applied.
func (f *FakeShard) Scroll(_ context.Context, req *shardpb.ScrollRequest) (*shardpb.ScrollResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.coll(req.GetCollection())
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(c.docs))
	for id := range c.docs {
		if !req.GetHasFrom() || idorder.Compare(id, req.GetFrom()) >= 0 {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, idorder.Compare)
	out := &shardpb.ScrollResponse{Count: uint64(len(c.docs)), DocCount: uint64(len(c.docs))}
	for _, id := range ids[:min(len(ids), int(req.GetLimit()))] {
		d := c.docs[id]
		v := &shardpb.Vector{Id: id}
		if req.GetWithVector() {
			v.Vector = d.GetVector()
		}
		if req.GetWithPayload() != nil {
			v.Payload = d.GetPayload()
		}
		out.Points = append(out.Points, v)
	}
	return out, nil
}

// Search scores every document of the collection against each query
// (dot product, or L2 distance under l2); filters and thresholds are not
// applied.
func (f *FakeShard) Search(ctx context.Context, req *shardpb.SearchRequest) (*shardpb.SearchResponse, error) {
	f.mu.Lock()
	code, delay := f.searchCode, f.searchDelay
	f.mu.Unlock()
	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	if code != codes.OK {
		return nil, status.Error(code, "scripted fault")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.coll(req.GetCollection())
	if err != nil {
		return nil, err
	}
	m, err := vector.ParseMetric(c.entry.GetSettings().GetMetric())
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	out := &shardpb.SearchResponse{DocCount: uint64(len(c.docs)), Exact: true}
	for _, q := range req.GetQueries() {
		qv, err := shard.DecodeVector(q.GetVector())
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		var hits []vector.Hit
		for id, d := range c.docs {
			if id == q.GetExcludeId() {
				continue
			}
			dv, _ := shard.DecodeVector(d.GetVector())
			hits = append(hits, vector.Hit{ID: id, Score: score(m, qv, dv)})
		}
		sort.Slice(hits, func(i, j int) bool { return m.Better(hits[i], hits[j]) })
		hits = hits[:min(len(hits), int(q.GetK()))]
		l := &shardpb.HitList{}
		for _, h := range hits {
			ph := &shardpb.Hit{Id: h.ID, Score: h.Score}
			if q.GetWithPayload() != nil {
				ph.Payload = c.docs[h.ID].GetPayload()
			}
			l.Hits = append(l.Hits, ph)
		}
		out.Results = append(out.Results, l)
	}
	return out, nil
}

func score(m vector.Metric, a, b []float32) float32 {
	var s float64
	for i := range min(len(a), len(b)) {
		if m == vector.Euclidean {
			d := float64(a[i] - b[i])
			s += d * d
		} else {
			s += float64(a[i]) * float64(b[i])
		}
	}
	if m == vector.Euclidean {
		s = math.Sqrt(s)
	}
	return float32(s)
}
