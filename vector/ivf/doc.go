// Package ivf is an inverted-file index over a shard's rows: k-means
// centroids partition the rows into lists, a query probes its nprobe
// nearest lists, scanning the int8 codes of their rows (vector/quant)
// for candidates, and re-scores those exactly from the float32 rows
// (vector.Kernel.Rescore). Returned scores are exact; only the candidate
// set is approximate, and a query's cost grows with the rows of the lists
// it probes (about nprobe·√N), not with the shard.
//
// # Determinism
//
// The centroids (Train, on a sample the leader copies out of its rows)
// are plain data, MarshalBinary'd and committed through the consensus
// log. Everything after them is a pure function of (centroids, int8
// scale, rows): which list a row is in (its nearest centre by keys summed
// in float64 in a fixed order, ties to the lower list id; the SIMD kernel
// only narrows down which centres to sum that way, see coarse), which
// lists a query probes, and which candidates it keeps (exact int32 code
// sums, ties by id). So replicas applying the same writes hold the same
// lists, Build from the committed centroids on load or snapshot install
// gives the leader's lists, and a hedge or failover never changes which
// rows a query reads. Train itself need not be repeatable across
// machines: only the leader runs it.
//
// # Use in a shard
//
//	sample := ivf.Sample(rows, ivf.SampleSize(ivf.DefaultLists(n), n), seed) // leader, under the read lock
//	c, err := ivf.Train(ctx, f, metric, sample, dim, ivf.Config{Rows: n})   // no lock; commit c.MarshalBinary()
//	x, err := ivf.Build(f, c, scale, rows)                                   // every replica, on apply and on load
//	x.Append(v) / x.Set(i, v) / x.Delete(i)                                  // beside each arena write, same i
//	hits, err := x.Search(ctx, int8Kernel, f, rows, []ivf.Query{...})        // under the read lock
//	if ivf.NeedsRetrain(c.TrainedRows, n) { ... train again in the background, commit, Build, swap }
//
// The index mirrors the float32 arena row for row, as quant.Codes does,
// and is guarded by the same lock. A filter reaches the scan as
// Query.Allow; ScanExactly says when a filter keeps so few rows that
// scanning them exactly is both cheaper and loses nothing.
//
// Like packages vector and quant, ivf must never import a trawl package
// other than those two (never shard: the shard imports it), do I/O, or
// keep mutable package-level state; it takes kernels as values.
package ivf
