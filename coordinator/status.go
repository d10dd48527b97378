package coordinator

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/shard"
	"github.com/trawl-search/trawl/shard/shardpb"
)

// StatusTimeout is the budget of a cluster status survey: every replica is
// asked at once, so a dead one shows as such instead of holding the page.
const StatusTimeout = time.Second

// ReplicaStatus is one replica as /cluster/status shows it.
type ReplicaStatus struct {
	Addr                string
	ConnState           string
	Suspect             bool
	ConsecutiveFailures int
	LastError           string
	Latency             time.Duration
	// Answered is false when the replica did not answer the survey; the
	// fields below are then zero.
	Answered bool
	Kernel   string
	// DocCount is the replica's documents over every collection.
	DocCount uint64
	// Role is the replica's place in its consensus group (leader,
	// follower, candidate); Serving whether it answers reads now.
	Role    string
	Serving bool
	// CommitIndex and AppliedIndex are its consensus log positions; Lag
	// is how far its applied index trails the highest applied index any
	// replica of the shard reported.
	CommitIndex, AppliedIndex, Lag uint64
	// ScanRate is the replica's measured scan speed at start, in
	// 1536-D-equivalent rows per second per core; ScanRateLive the
	// running rate of its real full exact scans. 0: not measured yet.
	ScanRate, ScanRateLive float64
	// CatalogVersion is the log index of its group's last catalog
	// change; Collections what it holds of each collection.
	CatalogVersion uint64
	Collections    []ReplicaCollection
}

// ReplicaCollection is one collection on one replica.
type ReplicaCollection struct {
	Collection
	DocCount uint64
	// Bytes is the memory its rows, payloads, codes and index hold.
	Bytes uint64
	// Index is what its approximate queries scan.
	Index *IndexStatus
}

// MaxRowsWithin is how many rows of dimension dim one of the replica's
// cores scans within budget at its measured rate: the shard-sizing rule
// /cluster/status shows (0 before the replica has measured).
func (r ReplicaStatus) MaxRowsWithin(dim int, budget time.Duration) uint64 {
	return shard.MaxRowsWithin(r.ScanRate, dim, budget)
}

// IndexStatus is a replica's index (shardpb.IndexStats says what each
// field means).
type IndexStatus struct {
	Kind, State              string
	Lists, DefaultNProbe     int
	NProbeCalibrated         bool
	TrainedRows, Rows, Bytes uint64
	Error                    string
}

// BytesPerVector is the index's memory a row beside its float32 row, 0 on
// an empty index.
func (ix IndexStatus) BytesPerVector() float64 {
	if ix.Rows == 0 {
		return 0
	}
	return float64(ix.Bytes) / float64(ix.Rows)
}

// ShardStatus is one shard as /cluster/status shows it.
type ShardStatus struct {
	Name string
	// DocCount is the last count a fan-out saw, or, before any, the largest
	// a replica reported.
	DocCount uint64
	Replicas []ReplicaStatus
}

// ClusterStatus is the whole cluster as an operator sees it.
type ClusterStatus struct {
	// Collections is the catalog as the router last read it.
	Collections   []Collection
	Disagreements []string
	Shards        []ShardStatus
}

// Status surveys every replica (suspect ones too) within StatusTimeout,
// through the engine, without changing any health state.
func (c *Coordinator) Status(ctx context.Context) ClusterStatus {
	stats := c.stats(ctx)
	health := c.cluster.Status()
	v := c.cat.current()
	out := ClusterStatus{Disagreements: []string{}}
	for _, coll := range v.colls {
		out.Collections = append(out.Collections, coll)
	}
	slices.SortFunc(out.Collections, func(a, b Collection) int { return cmp.Compare(a.Name, b.Name) })
	// The survey, the health and the topology are three reads of a replica
	// set discovery may change between them: they are matched by address,
	// and a replica that joined in between shows as not answering.
	for i, sh := range c.cluster.Shards() {
		ss := ShardStatus{Name: sh.Name, DocCount: health[i].Docs}
		healthOf := map[string]fanout.ReplicaStatus{}
		for _, h := range health[i].Replicas {
			healthOf[h.Addr] = h
		}
		statsOf := map[string]fanout.Answered[*shardpb.StatsResponse]{}
		for _, a := range stats[i] {
			statsOf[a.Replica] = a
		}
		for _, conn := range sh.Replicas {
			h := healthOf[conn.Addr()]
			rs := ReplicaStatus{
				Addr: conn.Addr(), ConnState: conn.State().String(), Suspect: h.Suspect,
				ConsecutiveFailures: h.ConsecutiveFailures, LastError: h.LastError, Latency: h.Latency,
			}
			if a, ok := statsOf[conn.Addr()]; ok && a.Err == nil {
				st := a.Value
				rs.Answered, rs.DocCount, rs.Kernel = true, st.GetDocCount(), st.GetKernel()
				rs.Role, rs.Serving, rs.CommitIndex, rs.AppliedIndex = st.GetRole(), st.GetServing(), st.GetCommitIndex(), st.GetAppliedIndex()
				rs.ScanRate, rs.ScanRateLive = st.GetScanRate(), st.GetScanRateLive()
				rs.CatalogVersion = st.GetCatalogVersion()
				held := map[string]uint64{}
				for _, cs := range st.GetCollections() {
					rc := ReplicaCollection{Collection: collectionOf(cs.GetEntry()), DocCount: cs.GetDocCount(), Bytes: cs.GetBytes(),
						Index: indexStatusOf(cs.GetIndex())}
					rs.Collections = append(rs.Collections, rc)
					held[rc.Name] = rc.UID
				}
				ss.DocCount = max(ss.DocCount, rs.DocCount)
				for _, coll := range out.Collections {
					if uid, ok := held[coll.Name]; !ok || uid != coll.UID {
						out.Disagreements = append(out.Disagreements, fmt.Sprintf(
							"%s replica %s does not hold collection %s (uid %d) of the catalog", sh.Name, conn.Addr(), coll.Name, coll.UID))
					}
				}
			}
			ss.Replicas = append(ss.Replicas, rs)
		}
		// Lag is measured against the most advanced replica's applied
		// index, not the commit index: the log also commits entries the
		// store never applies (a new leader's barrier, configurations).
		var ahead uint64
		for _, rs := range ss.Replicas {
			ahead = max(ahead, rs.AppliedIndex)
		}
		for j := range ss.Replicas {
			if rs := &ss.Replicas[j]; rs.Answered && ahead > rs.AppliedIndex {
				rs.Lag = ahead - rs.AppliedIndex
			}
		}
		out.Shards = append(out.Shards, ss)
	}
	return out
}

func indexStatusOf(ix *shardpb.IndexStats) *IndexStatus {
	if ix == nil {
		return nil
	}
	return &IndexStatus{
		Kind: ix.GetKind(), State: ix.GetState(), Lists: int(ix.GetLists()), DefaultNProbe: int(ix.GetDefaultNprobe()),
		NProbeCalibrated: ix.GetNprobeCalibrated(),
		TrainedRows:      ix.GetTrainedRows(), Rows: ix.GetRows(), Bytes: ix.GetBytes(), Error: ix.GetError(),
	}
}
