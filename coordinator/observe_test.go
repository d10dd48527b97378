package coordinator

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/shard/client"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// catalogShard is a replica that answers Catalog and Stats from what the
// test sets, and refuses both while down.
type catalogShard struct {
	shardpb.UnimplementedShardServer
	mu      sync.Mutex
	colls   []*shardpb.CollectionEntry
	dropped map[string]uint64
	docs    map[string]uint64
	down    bool
}

func (s *catalogShard) set(docs map[string]uint64, colls ...*shardpb.CollectionEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.colls, s.docs = colls, docs
}

func (s *catalogShard) Catalog(context.Context, *shardpb.CatalogRequest) (*shardpb.CatalogResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return nil, status.Error(codes.Unavailable, "down")
	}
	var version uint64
	for _, e := range s.colls {
		version = max(version, e.GetUid())
	}
	return &shardpb.CatalogResponse{Collections: s.colls, Dropped: s.dropped, Version: version}, nil
}

func (s *catalogShard) Stats(context.Context, *shardpb.StatsRequest) (*shardpb.StatsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return nil, status.Error(codes.Unavailable, "down")
	}
	out := &shardpb.StatsResponse{}
	for _, e := range s.colls {
		out.Collections = append(out.Collections, &shardpb.CollectionStats{Entry: e, DocCount: s.docs[e.GetName()]})
		out.DocCount += s.docs[e.GetName()]
	}
	return out, nil
}

// observed keeps what the coordinator reported.
type observed struct {
	mu   sync.Mutex
	last map[string]uint64
	n    int
}

func (o *observed) ObserveCollections(docs map[string]uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.last, o.n = docs, o.n+1
}

func entry(name string, uid uint64) *shardpb.CollectionEntry {
	return &shardpb.CollectionEntry{Name: name, Uid: uid, Settings: &shardpb.CollectionSettings{Dim: 4, Metric: "cosine"}}
}

// TestSurveyCollections: the observer hears every collection of the
// catalog with its documents summed over the shards; a shard holding
// another incarnation of a name does not count toward it; a shard that
// stops answering counts with its last answer; a dropped collection
// leaves the report.
func TestSurveyCollections(t *testing.T) {
	fakes := []*catalogShard{{}, {}}
	obs := &observed{}
	c := New(Config{Cluster: fanout.New(catalogShards(t, fakes), fanout.Options{}), Collections: obs})
	ctx := context.Background()

	fakes[0].set(map[string]uint64{"docs": 10, "img": 3}, entry("docs", 5), entry("img", 7))
	fakes[1].set(map[string]uint64{"docs": 20, "img": 100}, entry("docs", 5), entry("img", 6)) // an older img
	require.NoError(t, c.SurveyCollections(ctx))
	require.Equal(t, map[string]uint64{"docs": 30, "img": 3}, obs.last)

	fakes[0].set(map[string]uint64{"docs": 11, "img": 4}, entry("docs", 5), entry("img", 7))
	fakes[1].mu.Lock()
	fakes[1].down = true
	fakes[1].mu.Unlock()
	require.NoError(t, c.SurveyCollections(ctx))
	require.Equal(t, map[string]uint64{"docs": 31, "img": 4}, obs.last, "shard-1 counts with its last answer")

	// img dropped (the authority's version moves past its uid).
	fakes[0].set(map[string]uint64{"docs": 11}, entry("docs", 5), entry("later", 9))
	require.NoError(t, c.SurveyCollections(ctx))
	require.Equal(t, map[string]uint64{"docs": 31, "later": 0}, obs.last)
	require.Equal(t, 3, obs.n)
}

// catalogShards serves each fake as one shard of one replica, named
// shard-0, shard-1, ... (shard-0 is the authority).
func catalogShards(t *testing.T, fakes []*catalogShard) []fanout.Shard[*client.Conn] {
	t.Helper()
	var shards []fanout.Shard[*client.Conn]
	for i, f := range fakes {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		g := grpc.NewServer()
		shardpb.RegisterShardServer(g, f)
		go g.Serve(ln)
		t.Cleanup(g.Stop)
		conn, err := client.Dial(ln.Addr().String(), client.DialConfig{})
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn.WaitSettled(ctx)
		cancel()
		shards = append(shards, fanout.Shard[*client.Conn]{Name: fmt.Sprintf("shard-%d", i), Replicas: []*client.Conn{conn}})
	}
	return shards
}

// TestDroppedStaysGoneWithoutTheAuthority: when the authority cannot be
// read right after a drop, the view built from the groups' answers keeps
// the collection gone (404) once any group has dropped it, instead of
// bringing it back from the authority's last answer as "still being
// created" (503); one no answering group has dropped yet still shows.
func TestDroppedStaysGoneWithoutTheAuthority(t *testing.T) {
	fakes := []*catalogShard{{}, {}, {}}
	c := New(Config{Cluster: fanout.New(catalogShards(t, fakes), fanout.Options{})})
	ctx := context.Background()
	for _, f := range fakes {
		f.set(nil, entry("docs", 5), entry("img", 7))
	}
	_, err := c.refreshCatalog(ctx)
	require.NoError(t, err)
	_, err = c.Collection(ctx, "img")
	require.NoError(t, err)

	// img and docs dropped on the authority, which then stops answering;
	// shard-1 has applied the drop of img, shard-2 neither drop yet.
	fakes[0].mu.Lock()
	fakes[0].down = true
	fakes[0].mu.Unlock()
	fakes[1].mu.Lock()
	fakes[1].colls, fakes[1].dropped = []*shardpb.CollectionEntry{entry("docs", 5)}, map[string]uint64{"img": 7}
	fakes[1].mu.Unlock()
	_, err = c.refreshCatalog(ctx)
	require.NoError(t, err)
	_, err = c.Collection(ctx, "img")
	require.Equal(t, CodeCollectionNotFound, CodeOf(err), "img: %v", err)
	_, err = c.Collection(ctx, "docs")
	require.NoError(t, err, "a collection no group has dropped still serves")
}
