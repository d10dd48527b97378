package shard

import "time"

// RefDim is the dimension scan rates are expressed in: a rate is 1536-D
// rows per second, so replicas of different dimensions compare, and the
// sizing rule reads straight off it.
const RefDim = 1536

// MaxScrollLimit is the largest page a Scroll returns: a router page of
// 10 000 and the id the next page starts at.
const MaxScrollLimit = 10001

// MaxRowsWithin is how many dim-D rows one core scans in budget at rate
// RefDim-equivalent rows per second: the largest shard, per core it may
// use, that a per-shard deadline of budget covers.
func MaxRowsWithin(rate float64, dim int, budget time.Duration) uint64 {
	if rate <= 0 || dim <= 0 || budget <= 0 {
		return 0
	}
	return uint64(rate * RefDim / float64(dim) * float64(budget) / float64(time.Second))
}

// A shard answers a facet with every value the key holds under the
// filter and its count: the router needs them all for exact sums (the
// top values of each shard do not make the top values of the whole). A
// key of more distinct values than MaxFacetValues, or whose values take
// more than MaxFacetBytes, is refused (InvalidArgument) rather than
// answered with a message near the transport's 64 MiB limit that the
// router would have to sum in memory: Qdrant's facet is for keys of
// modest cardinality too.
const (
	MaxFacetValues = 100_000
	MaxFacetBytes  = 16 << 20
)
