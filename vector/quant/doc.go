// Package quant scores int8 codes of float32 vectors, for a scan that reads
// a quarter of the bytes a float32 scan reads and then re-scores a
// shortlist exactly.
//
// # Encoding
//
// A Scale, trained from a shard's rows by Train, maps element d of a row to
// the code round(x/step[d]) clamped to [-127, 127]: one step for the whole
// shard (PerShard, DefaultKind, as measured best: the largest |x| of the
// training rows once the top millionth of elements is set aside, over
// 127) or one per dimension (PerDimension, max|x_d|/127). Steps fold into the
// query (w_d = q_d·step_d, itself coded in [-63, 63] with its own step),
// so the kernels multiply plain integers. Codes also keep each row's |x|² (float64 sum, rounded once),
// so Euclidean candidates are ranked on |x|² − 2q·x, and its code sum, for
// the AVX2 tile.
//
// Training and encoding are pure functions with a fixed sequence of
// float32 operations (a maximum, one division per step, one per element;
// no fused multiply-adds), so every replica given the same Scale,
// serialised with MarshalBinary and committed through the consensus log,
// and the same rows holds the same codes and finds the same candidates: a
// hedge never changes an answer. Code sums are exact int32s, so every
// kernel and every batching or split of a scan gives the same candidates.
//
// # Use in a shard
//
//	scale, err := quant.TrainRows(rows, n, quant.DefaultKind)          // leader; commit scale.MarshalBinary()
//	var s quant.Scale; err = s.UnmarshalBinary(b)                       // every replica, on apply
//	codes, err := quant.Encode(s, rows)                                 // or NewCodes(s) and Append per row
//	codes.Append(v) / codes.Set(i, v) / codes.Delete(i)                 // beside each row write, same i
//	hits, err := quant.FromEnv().Scan(ctx, f, metric, rows, codes, queries, oversample)
//
// Codes mirrors the float32 rows row for row (Delete moves the last row
// into the hole, as the store does) and is guarded by the same lock; its
// codes are kept in a vector.Arena's chunks as the rows are.
// Kernel.Scan keeps each query's best oversample·k rows by code score in
// one pass over the codes per batch, then re-scores them with the float32
// kernel (vector.Kernel.Rescore): returned scores are exact, only the
// candidate set is approximate. A query's "exact": true means calling
// vector.Kernel.Scan instead; its "oversample" (1..32, 0 for
// DefaultOversample) is passed through.
//
// # Kernels
//
// "generic" is portable Go; on amd64, "avx2" is assembly: VPABSB/VPSIGNB
// and VPMADDUBSW/VPMADDWD into int32 lanes for one query, and for pairs of
// queries a tile that offsets the query codes into unsigned bytes and
// multiplies the rows' codes directly. Codes must stay in [-127, 127] (two
// products of 127·127 are the most a VPMADDUBSW pair sum holds, and
// VPSIGNB cannot negate -128). There is no AVX-512 VNNI (VPDPBUSD) or AMX
// kernel yet: the machine this was written on has neither, so such a
// kernel could not have been run or tested.
//
// Like package vector, quant must never import a trawl package other than
// vector, do I/O, or keep mutable package-level state.
package quant
