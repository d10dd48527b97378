package coordinator

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/shardpb"
	"github.com/trawl-search/trawl/vector"
)

// Record is one validated document to store.
type Record struct {
	ID     string
	Vector []float32
}

// WriteResult is one id's part of a write.
type WriteResult struct {
	ID string
	// Outcome is fanout.WriteOK, WriteFailed (not applied) or WriteUnknown
	// (may have been applied; never replayed).
	Outcome string
	// Err says why, when Outcome is not ok.
	Err *Error
}

// retryNote ends every write error: upserts are keyed, so a retry is safe.
const retryNote = " Upserts are keyed by id, so retrying the request is safe."

// Upsert writes recs to their home shards, each shard's share in one RPC
// per replica, all shards at once, within shard.WriteTimeout. Results are in
// recs' order.
func (c *Coordinator) Upsert(ctx context.Context, recs []Record) []WriteResult {
	byShard := map[string][]int{}
	for i, rec := range recs {
		home := c.placement.Home(rec.ID)
		byShard[home] = append(byShard[home], i)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shard.WriteTimeout)
	defer cancel()
	results := make([]WriteResult, len(recs))
	var wg sync.WaitGroup
	for name, idx := range byShard {
		wg.Go(func() {
			vs := make([]*shardpb.Vector, len(idx))
			for j, i := range idx {
				vs[j] = &shardpb.Vector{Id: recs[i].ID, Vector: vector.EncodeLE(recs[i].Vector)}
			}
			p := shard.Placement{Fingerprint: c.placement.Fingerprint(), Shard: name}
			wr, err := fanout.Broadcast(ctx, c.cluster, name, func(ctx context.Context, r *shard.Conn) error {
				return r.Upsert(ctx, p, vs)
			})
			res := shardWriteResult(name, wr, err)
			for _, i := range idx {
				res.ID = recs[i].ID
				results[i] = res
			}
		})
	}
	wg.Wait()
	return results
}

// Delete removes id from its home shard and reports whether any replica
// held it.
func (c *Coordinator) Delete(ctx context.Context, id string) (bool, WriteResult) {
	home := c.placement.Home(id)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shard.WriteTimeout)
	defer cancel()
	p := shard.Placement{Fingerprint: c.placement.Fingerprint(), Shard: home}
	var mu sync.Mutex
	found := false
	wr, err := fanout.Broadcast(ctx, c.cluster, home, func(ctx context.Context, r *shard.Conn) error {
		f, err := r.Delete(ctx, p, id)
		mu.Lock()
		found = found || f
		mu.Unlock()
		return err
	})
	res := shardWriteResult(home, wr, err)
	res.ID = id
	return found, res
}

// shardWriteResult folds the replicas' outcomes into the result every id of
// that shard gets: ok only when every replica acknowledged; unknown when
// any replica may have applied it; otherwise failed.
func shardWriteResult(name string, wr []fanout.WriteResult, err error) WriteResult {
	if err != nil {
		return WriteResult{Outcome: fanout.WriteFailed, Err: errorf(CodeInternal, err, "%v", err)}
	}
	var unknown, failed []string
	code := CodeUnavailable
	for _, x := range wr {
		switch x.Outcome {
		case fanout.WriteUnknown:
			unknown = append(unknown, fmt.Sprintf("%s: %v", x.Replica, status.Convert(x.Err).Message()))
		case fanout.WriteFailed:
			failed = append(failed, fmt.Sprintf("%s: %v", x.Replica, status.Convert(x.Err).Message()))
			switch status.Code(x.Err) {
			case codes.FailedPrecondition:
				code = CodeConflict
			case codes.InvalidArgument, codes.Internal:
				code = CodeInternal
			}
		}
	}
	switch {
	case len(unknown) > 0:
		return WriteResult{Outcome: fanout.WriteUnknown, Err: errorf(CodeOutcomeUnknown, nil,
			"shard %s: the write may or may not have been applied on %s.%s",
			name, strings.Join(append(unknown, failed...), "; "), retryNote)}
	case len(failed) > 0:
		return WriteResult{Outcome: fanout.WriteFailed, Err: errorf(code, nil,
			"shard %s: not acknowledged by every replica (%s).%s", name, strings.Join(failed, "; "), retryNote)}
	}
	return WriteResult{Outcome: fanout.WriteOK}
}
