package client

import (
	"context"
	"fmt"
	"net"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// DialConfig is how the router reaches shards.
type DialConfig struct {
	// Creds, when set, are the transport credentials (ClientCredentials for
	// TLS and mTLS). Nil means plaintext.
	Creds credentials.TransportCredentials
	// Dialer, when set, replaces the TCP dialer (tests inject faults here).
	Dialer func(ctx context.Context, addr string) (net.Conn, error)
	// Lazy leaves the channel idle until the first RPC instead of
	// connecting (and handshaking) at once (--prewarm=false, baselines
	// only: the first queries then find no ready replica).
	Lazy bool
	// TracerProvider, when set (and not OpenTelemetry's noop provider),
	// makes a client span per RPC and sends the trace context to the
	// replica. Nil: no tracing instrumentation at all.
	TracerProvider trace.TracerProvider
	// Propagator encodes the trace context into the RPC's metadata; W3C
	// tracecontext and baggage if nil.
	Propagator propagation.TextMapPropagator
}

// Conn is the router's channel to one replica.
type Conn struct {
	addr   string
	cc     *grpc.ClientConn
	shard  shardpb.ShardClient
	health healthpb.HealthClient
}

// Dial starts connecting to addr at once (no lazy first-RPC connect, so the
// first query after start-up does not pay for the handshake) and returns
// without waiting.
func Dial(addr string, cfg DialConfig) (*Conn, error) {
	opts := append(shard.DialOptions(cfg.Creds, cfg.Dialer),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	opts = append(opts, shard.ClientTracing(cfg.TracerProvider, cfg.Propagator)...)
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial shard %s: %w", addr, err)
	}
	if !cfg.Lazy {
		cc.Connect()
	}
	return &Conn{addr: addr, cc: cc, shard: shardpb.NewShardClient(cc), health: healthpb.NewHealthClient(cc)}, nil
}

// Addr is the replica's address.
func (c *Conn) Addr() string { return c.addr }

// State is the channel's connectivity state.
func (c *Conn) State() connectivity.State { return c.cc.GetState() }

// Ready reports whether the channel is READY. An IDLE channel (grpc-go drops
// to IDLE when a connection is lost) is told to reconnect, since only
// READY replicas are sent queries and nothing else would wake it.
func (c *Conn) Ready() bool {
	s := c.cc.GetState()
	if s == connectivity.Idle {
		c.cc.Connect()
	}
	return s == connectivity.Ready
}

// WaitSettled blocks until the channel is READY or has failed to connect
// (TRANSIENT_FAILURE), or ctx ends. Start-up warm-up uses it.
func (c *Conn) WaitSettled(ctx context.Context) connectivity.State {
	for {
		s := c.cc.GetState()
		switch s {
		case connectivity.Ready, connectivity.TransientFailure, connectivity.Shutdown:
			return s
		case connectivity.Idle:
			c.cc.Connect()
		}
		if !c.cc.WaitForStateChange(ctx, s) {
			return c.cc.GetState()
		}
	}
}

// Close closes the channel.
func (c *Conn) Close() error { return c.cc.Close() }

// Probe asks grpc.health.v1 whether the replica serves. ctx should carry the
// probe timeout.
func (c *Conn) Probe(ctx context.Context) error {
	resp, err := c.health.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return err
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return shard.ErrNotServing
	}
	return nil
}

// Collection names the collection a Scoped connection acts on: its name
// and the uid of the incarnation the caller means (0: whatever the
// replica holds). The zero Collection is the legacy collection.
type Collection struct {
	Name string
	UID  uint64
}

// Scoped is a Conn's RPCs on one collection (Conn.In). It is a small
// value, made per call.
type Scoped struct {
	conn *Conn
	coll Collection
	// slots, when set, is sent with reads (Get, Scroll): the slots the
	// caller's slot map gives this replica's shard.
	slots *shardpb.SlotSelection
}

// Slots returns c reading only the slots sel names (Get, Scroll).
func (c Scoped) Slots(sel *shardpb.SlotSelection) Scoped {
	c.slots = sel
	return c
}

// In returns c's RPCs on coll. A replica that holds no such collection
// refuses with a *shard.CollectionNotFoundError.
func (c *Conn) In(coll Collection) Scoped { return Scoped{conn: c, coll: coll} }

func (c Scoped) ref() *shardpb.CollectionRef {
	if c.coll == (Collection{}) {
		return nil
	}
	return &shardpb.CollectionRef{Name: c.coll.Name, Uid: c.coll.UID}
}

// Get, Upsert, Delete, DeleteMatching and Scroll on the legacy collection
// (a cluster written before collections).

// Get is In(Collection{}).Get.
func (c *Conn) Get(ctx context.Context, id string, minIndex uint64) (*shardpb.Vector, error) {
	return c.In(Collection{}).Get(ctx, id, minIndex)
}

// Upsert is In(Collection{}).Upsert, returning the write's log index.
func (c *Conn) Upsert(ctx context.Context, p shard.Placement, vs []*shardpb.Vector) (uint64, error) {
	a, err := c.In(Collection{}).Upsert(ctx, p, vs)
	return a.Index, err
}

// Delete is In(Collection{}).Delete, returning the delete's log index.
func (c *Conn) Delete(ctx context.Context, p shard.Placement, id string) (found bool, index uint64, err error) {
	found, a, err := c.In(Collection{}).Delete(ctx, p, id)
	return found, a.Index, err
}

// DeleteMatching is In(Collection{}).DeleteMatching, returning the
// delete's log index.
func (c *Conn) DeleteMatching(ctx context.Context, p shard.Placement, ids []string, f []byte) (deleted, index uint64, err error) {
	deleted, a, err := c.In(Collection{}).DeleteMatching(ctx, p, ids, f)
	return deleted, a.Index, err
}

// Ack is a committed write's receipt: the log index it committed at (pass
// it as minIndex to later reads of this shard for read-after-write), and
// ForwardedTo, the leader's address when the replica asked forwarded the
// write to it — the leader applied the write before answering, the
// forwarding replica perhaps not yet. Empty ForwardedTo: the replica
// asked applied it.
type Ack struct {
	Index       uint64
	ForwardedTo string
}

// Scroll is In(Collection{}).Scroll.
func (c *Conn) Scroll(ctx context.Context, req *shardpb.ScrollRequest) (*shardpb.ScrollResponse, error) {
	return c.In(Collection{}).Scroll(ctx, req)
}

// Get fetches one stored vector with its payload; minIndex as in Search.
func (c Scoped) Get(ctx context.Context, id string, minIndex uint64) (*shardpb.Vector, error) {
	resp, err := c.conn.shard.Get(ctx, &shardpb.GetRequest{Id: id, MinIndex: minIndex, Collection: c.ref(), Slots: c.slots})
	if err != nil {
		return nil, shard.AsRead(shard.FromStatus(err))
	}
	return resp.GetVector(), nil
}

// Upsert writes vectors through this replica and returns its Ack. A replica that is not the leader refuses with a
// *NotLeaderError (NeverSent() true, Leader() the hint); a write that was
// provably not sent has NeverSent() true too. Any other Unavailable or
// DeadlineExceeded may have been applied.
func (c Scoped) Upsert(ctx context.Context, p shard.Placement, vs []*shardpb.Vector) (Ack, error) {
	if !c.conn.Ready() {
		return Ack{}, shard.NeverSentError{Err: shard.ErrNoReadyConn}
	}
	resp, err := c.conn.shard.Upsert(ctx, &shardpb.UpsertRequest{
		Collection: c.ref(),
		Placement:  p.PB(),
		Vectors:    vs,
	})
	if err != nil {
		return Ack{}, shard.MarkNeverSent(shard.FromStatus(err))
	}
	return Ack{Index: resp.GetIndex(), ForwardedTo: resp.GetForwardedTo()}, nil
}

// Delete removes one id through this replica: whether it was there and the
// delete's Ack. Errors as for Upsert.
func (c Scoped) Delete(ctx context.Context, p shard.Placement, id string) (found bool, ack Ack, err error) {
	if !c.conn.Ready() {
		return false, Ack{}, shard.NeverSentError{Err: shard.ErrNoReadyConn}
	}
	resp, err := c.conn.shard.Delete(ctx, &shardpb.DeleteRequest{
		Collection: c.ref(),
		Placement:  p.PB(),
		Id:         id,
	})
	if err != nil {
		return false, Ack{}, shard.MarkNeverSent(shard.FromStatus(err))
	}
	return resp.GetFound(), Ack{Index: resp.GetIndex(), ForwardedTo: resp.GetForwardedTo()}, nil
}

// DeleteMatching removes every listed id and every document f (canonical
// filter JSON, nil for none) matches, in one log entry, through this
// replica: how many it removed and the delete's Ack. Errors as for Upsert.
func (c Scoped) DeleteMatching(ctx context.Context, p shard.Placement, ids []string, f []byte) (deleted uint64, ack Ack, err error) {
	if !c.conn.Ready() {
		return 0, Ack{}, shard.NeverSentError{Err: shard.ErrNoReadyConn}
	}
	resp, err := c.conn.shard.Delete(ctx, &shardpb.DeleteRequest{
		Collection: c.ref(),
		Placement:  p.PB(),
		Ids:        ids,
		Filter:     f,
	})
	if err != nil {
		return 0, Ack{}, shard.MarkNeverSent(shard.FromStatus(err))
	}
	return resp.GetDeleted(), Ack{Index: resp.GetIndex(), ForwardedTo: resp.GetForwardedTo()}, nil
}

// Edit commits an ordered list of edits through this replica, in one log
// entry applied all or nothing, and returns its Ack. Errors as for Upsert;
// a refusal of the edits themselves (an id absent: NotFound) is the
// shard's status.
func (c Scoped) Edit(ctx context.Context, p shard.Placement, edits []*shardpb.Edit) (Ack, error) {
	if !c.conn.Ready() {
		return Ack{}, shard.NeverSentError{Err: shard.ErrNoReadyConn}
	}
	resp, err := c.conn.shard.Edit(ctx, &shardpb.EditRequest{
		Collection: c.ref(),
		Placement:  p.PB(),
		Edits:      edits,
	})
	if err != nil {
		return Ack{}, shard.MarkNeverSent(shard.FromStatus(err))
	}
	return Ack{Index: resp.GetIndex(), ForwardedTo: resp.GetForwardedTo()}, nil
}

// Scroll lists a page of the replica's documents in id order; req's
// min_index as in Search.
func (c Scoped) Scroll(ctx context.Context, req *shardpb.ScrollRequest) (*shardpb.ScrollResponse, error) {
	req.Collection = c.ref()
	if c.slots != nil {
		req.Slots = c.slots
	}
	resp, err := c.conn.shard.Scroll(ctx, req)
	return resp, shard.AsRead(shard.FromStatus(err))
}

// Stats asks the replica for its counts and settings, of this collection
// only (the COLLECTION_NOT_FOUND refusal if it holds none).
func (c Scoped) Stats(ctx context.Context) (*shardpb.StatsResponse, error) {
	resp, err := c.conn.shard.Stats(ctx, &shardpb.StatsRequest{Collection: c.ref()})
	return resp, shard.FromStatus(err)
}

// Stats asks the replica for its counts and settings, every collection's.
func (c *Conn) Stats(ctx context.Context) (*shardpb.StatsResponse, error) {
	return c.shard.Stats(ctx, &shardpb.StatsRequest{})
}

// Catalog reads the replica's copy of its group's catalog; minIndex as in
// Search.
func (c *Conn) Catalog(ctx context.Context, minIndex uint64) (*shardpb.CatalogResponse, error) {
	resp, err := c.shard.Catalog(ctx, &shardpb.CatalogRequest{MinIndex: minIndex})
	return resp, shard.FromStatus(err)
}

// ChangeCatalog commits one catalog change through this replica's group.
// Errors as for Upsert; a change is idempotent, so an unknown outcome may
// be retried.
func (c *Conn) ChangeCatalog(ctx context.Context, req *shardpb.ChangeCatalogRequest) (*shardpb.ChangeCatalogResponse, error) {
	if !c.Ready() {
		return nil, shard.NeverSentError{Err: shard.ErrNoReadyConn}
	}
	resp, err := c.shard.ChangeCatalog(ctx, req)
	if err != nil {
		return nil, shard.MarkNeverSent(shard.FromStatus(err))
	}
	return resp, nil
}

// Members reads the replica's view of its group's membership; progress
// makes it ask every member for its log state (status).
func (c *Conn) Members(ctx context.Context, progress bool) (*shardpb.MembersResponse, error) {
	resp, err := c.shard.Members(ctx, &shardpb.MembersRequest{Progress: progress})
	return resp, shard.FromStatus(err)
}

// ChangeMembers adds, removes or replaces a replica of this replica's
// group (a follower forwards the change to its leader). Errors as for
// Upsert; every change is idempotent, so an unknown outcome may be
// retried.
func (c *Conn) ChangeMembers(ctx context.Context, req *shardpb.ChangeMembersRequest) (*shardpb.ChangeMembersResponse, error) {
	resp, err := c.shard.ChangeMembers(ctx, req)
	if err != nil {
		return nil, shard.MarkNeverSent(shard.FromStatus(err))
	}
	return resp, nil
}
