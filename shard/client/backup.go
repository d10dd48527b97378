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
	if !c.conn.Ready() {
		return shard.NeverSentError{Err: shard.ErrNoReadyConn}
	}
	st, err := c.conn.shard.Backup(ctx, &shardpb.BackupRequest{BackupId: id, Fence: fence, Collection: c.ref(), Slots: c.slots})
	if err != nil {
		return shard.MarkNeverSent(shard.FromStatus(err))
	}
	first, err := st.Recv()
	if err != nil {
		return shard.MarkNeverSent(shard.FromStatus(err))
	}
	if first.GetHeader() == nil {
		return fmt.Errorf("backup stream from %s began without a header", c.conn.Addr())
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
