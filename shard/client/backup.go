package client

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// Backup asks this replica to export its collection at a backup cut named
// id (unique per backup): the replica has its group commit the cut, takes
// its view when it applies it, and streams it. header is called once,
// first; rows once per chunk, in the view's row order. A failure before
// the header was received has NeverSent() true when the call provably
// never left, so another replica may be asked; a cut that committed but
// was never read changes nothing.
//
// fence, when set, has the cut pause the collection's writes on this
// group until LiftFence(fence) (or the fence's lease ends).
func (c Scoped) Backup(ctx context.Context, id, fence string, header func(*shardpb.BackupHeader) error, rows func([]*shardpb.Vector) error) error {
	return c.conn.backup(ctx, &shardpb.BackupRequest{BackupId: id, Fence: fence, Collection: c.ref(), Slots: c.slots}, header, rows)
}

// BackupPart is one collection of a cluster backup: its slots as Slots
// gives them for a read (nil: every row).
type BackupPart struct {
	Collection Collection
	Slots      *shardpb.SlotSelection
}

// BackupParts is Backup of several collections at one cut (a cluster
// backup's): the group commits one cut entry covering them all, raising
// fence on each, and the replica streams them in the order given, each
// opened by its header (the header's entry names it).
func (c *Conn) BackupParts(ctx context.Context, id, fence string, parts []BackupPart, header func(*shardpb.BackupHeader) error, rows func([]*shardpb.Vector) error) error {
	req := &shardpb.BackupRequest{BackupId: id, Fence: fence}
	for _, p := range parts {
		req.Parts = append(req.Parts, &shardpb.BackupPart{Collection: c.In(p.Collection).ref(), Slots: p.Slots})
	}
	return c.backup(ctx, req, header, rows)
}

func (c *Conn) backup(ctx context.Context, req *shardpb.BackupRequest, header func(*shardpb.BackupHeader) error, rows func([]*shardpb.Vector) error) error {
	if !c.Ready() {
		return shard.NeverSentError{Err: shard.ErrNoReadyConn}
	}
	st, err := c.shard.Backup(ctx, req)
	if err != nil {
		return shard.MarkNeverSent(shard.FromStatus(err))
	}
	first, err := st.Recv()
	if err != nil {
		return shard.MarkNeverSent(shard.FromStatus(err))
	}
	if first.GetHeader() == nil {
		return fmt.Errorf("backup stream from %s began without a header", c.Addr())
	}
	if err := header(first.GetHeader()); err != nil {
		return err
	}
	for {
		ch, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return shard.FromStatus(err)
		}
		if h := ch.GetHeader(); h != nil {
			if err := header(h); err != nil {
				return err
			}
			continue
		}
		if err := rows(ch.GetVectors()); err != nil {
			return err
		}
	}
}

// LiftFence ends a backup fence on this replica's group (a write: the
// leader commits it, a follower forwards it). lifted is false when the
// fence's lease had ended first (or it was never raised). Errors as for
// Upsert.
func (c Scoped) LiftFence(ctx context.Context, fence string) (lifted bool, err error) {
	if !c.conn.Ready() {
		return false, shard.NeverSentError{Err: shard.ErrNoReadyConn}
	}
	resp, err := c.conn.shard.ProposeBackupCut(ctx, &shardpb.BackupCutRequest{Lift: fence, Collection: c.ref()})
	if err != nil {
		return false, shard.MarkNeverSent(shard.FromStatus(err))
	}
	return resp.GetLifted(), nil
}

// LiftFences is LiftFence of a cluster backup's fence, on every one of
// colls at one entry: lifted is false when any fence's lease had ended
// first.
func (c *Conn) LiftFences(ctx context.Context, fence string, colls []Collection) (lifted bool, err error) {
	if !c.Ready() {
		return false, shard.NeverSentError{Err: shard.ErrNoReadyConn}
	}
	req := &shardpb.BackupCutRequest{Lift: fence}
	for _, coll := range colls {
		req.Collections = append(req.Collections, c.In(coll).ref())
	}
	resp, err := c.shard.ProposeBackupCut(ctx, req)
	if err != nil {
		return false, shard.MarkNeverSent(shard.FromStatus(err))
	}
	return resp.GetLifted(), nil
}
