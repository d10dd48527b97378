package coordinator

import (
	"sync"
	"sync/atomic"
	"time"
)

// PreferFor is how long after a write's acknowledgement the replicas
// known to have applied it are asked first by reads that must see it.
// Followers apply a write milliseconds after it commits, and a serving
// replica has applied what its leader committed within the shards'
// --max-leader-silence (5 s by default): past that, the replica that
// acknowledged is no better a first choice than the others, and keeping
// the preference would send every read of a shard written once to its
// leader for good.
const PreferFor = 5 * time.Second

// progress is what this router knows of each shard's log: the highest
// index it saw acknowledged (reads send it as min_index, so a search that
// starts after an acknowledgement never reads a replica that has not
// applied it) and which replicas are known to have applied that index (a
// read asks them first, so it does not wait on a follower still applying
// it). Its memory is one entry per shard and one flag per replica.
type progress struct {
	now    func() time.Time
	shards []shardProgress // cluster order
}

type shardProgress struct {
	// index is the highest acknowledged index, read on every attempt.
	index atomic.Uint64
	// until is when the preference for the replicas that applied index
	// ends (UnixNano; 0: none yet): past it, reads, the hot path, skip
	// the lock below.
	until atomic.Int64

	mu sync.Mutex
	// witnessed is the index known, the time it was first acknowledged,
	// and the replicas (by address) known to have applied it. Addresses,
	// not positions: a shard's replica set changes as the router
	// discovers its group.
	witnessed uint64
	at        time.Time
	applied   map[string]bool
}

// noReplica names no replica (a write whose applying replica the router
// cannot name).
const noReplica = ""

func newProgress(shards int, now func() time.Time) *progress {
	p := &progress{now: now, shards: make([]shardProgress, shards)}
	for i := range p.shards {
		p.shards[i].applied = map[string]bool{}
	}
	return p
}

// acked records that the replica rep (noReplica if unknown) of shard
// acknowledged a write at idx, having applied it.
func (p *progress) acked(shard int, rep string, idx uint64) {
	s := &p.shards[shard]
	for {
		cur := s.index.Load()
		if idx <= cur || s.index.CompareAndSwap(cur, idx) {
			break
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case idx > s.witnessed:
		s.witnessed, s.at = idx, p.now()
		s.until.Store(s.at.Add(PreferFor).UnixNano())
		clear(s.applied)
	case idx < s.witnessed:
		// An older write answering late: its replica has applied idx, not
		// necessarily the newer index reads now ask for.
		return
	}
	if rep != noReplica {
		s.applied[rep] = true
	}
}

// served records that the replica rep answered a read that asked for
// idx: it has applied idx.
func (p *progress) served(shard int, rep string, idx uint64) {
	if idx == 0 {
		return
	}
	s := &p.shards[shard]
	if p.now().UnixNano() >= s.until.Load() {
		return // past the preference, who applied it no longer matters
	}
	s.mu.Lock()
	if idx == s.witnessed {
		s.applied[rep] = true
	}
	s.mu.Unlock()
}

// minIndex is the index a read of shard must see.
func (p *progress) minIndex(shard int) uint64 { return p.shards[shard].index.Load() }

// prefer reports whether a read of shard should ask the replica rep
// first: it is known to have applied the index reads of the
// shard must see, acknowledged less than PreferFor ago. With no write
// acknowledged, or none known to have applied it, nobody is preferred.
func (p *progress) prefer(shard int, rep string) bool {
	s := &p.shards[shard]
	if p.now().UnixNano() >= s.until.Load() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied[rep] && p.now().Sub(s.at) < PreferFor
}
