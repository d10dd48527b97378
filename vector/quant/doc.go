// Package quant scores int8 codes of float32 vectors, for a scan that reads
// a quarter of the bytes and then re-scores a shortlist exactly.
//
// A Scale, trained from a shard's rows by Train, maps each element to an
// int8 code in [-127, 127] (x ≈ step·code, one step per dimension or one
// for the whole shard). Training and encoding are pure functions with a
// fixed order of float32 operations, so every replica given the same
// Scale (serialised with MarshalBinary) and the same rows holds the same
// codes, and the same candidates for a query. Codes is the arena of codes
// that mirrors a shard's float32 arena row for row.
//
// Kernel.Scan scores a batch of queries against the codes in one pass
// (exact int32 dot products, so every kernel and every batching gives the
// same candidates), keeps the best oversample×k rows per query, and
// re-scores those with the float32 vector.Kernel: the scores it returns
// are exact, and only the candidate set is approximate.
//
// Kernels: "generic" is portable Go; on amd64, "avx2" is assembly
// (VPSIGNB/VPABSB, VPMADDUBSW, VPMADDWD into int32 lanes). Codes must stay
// in [-127, 127]: VPSIGNB cannot negate -128, and two products of 127·127
// are the most a VPMADDUBSW pair sum holds without saturating.
//
// Like package vector, it must never import a trawl package other than
// vector, do I/O, or keep mutable package-level state.
package quant
