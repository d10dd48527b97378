// Package fusion holds the rules that fuse several ranked lists into one,
// as Qdrant's Query API does for {"fusion": "rrf"} and {"fusion": "dbsf"}:
// reciprocal rank fusion and distribution-based score fusion.
//
// The arithmetic is Qdrant's, step for step and in float32 (its scores'
// type), so a fused score here is bit-for-bit the score Qdrant gives the
// same lists: RRF's 1 / ((position + 1) / weight + k − 1) with positions
// counted from 0, and DBSF's Welford mean and sample variance, mean ± 3σ as
// the extremes, a constant list (σ = 0) and a one-point list both scored
// 0.5, and no clamping of points beyond 3σ. Where Qdrant leaves ties in no
// particular order, these functions break them by id ascending, the rule
// trawl's merges follow, so an answer is deterministic.
//
// The package is pure functions over values: no I/O, no clocks. The
// coordinator calls it on the globally merged list of each prefetch,
// never on one shard's.
package fusion
