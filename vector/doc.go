// Package vector scores float32 vectors: dot product, squared Euclidean
// distance and normalisation, with SIMD implementations chosen from the
// CPU's features, plus the batch scan, top-k selection and merge that a
// shard needs.
//
// Kernels: "generic" is portable Go; on amd64, "avx2" (AVX2+FMA) and
// "avx512" (AVX512F) are hand-written assembly, listed by Available when the
// CPU and OS support them and forced with TRAWL_VECTOR_KERNEL. Every kernel
// handles any length (tails are read with masked loads, never past a
// slice) and propagates NaN.
//
// Scan serves a batch of queries in one pass: each block of rows is scored
// against every query by tile kernels (up to six queries by four rows per
// call, prefetching the rows that follow) while it is in cache, each query
// keeps a k-sized heap, and large scans are split across cores. A pair's
// score is computed by the same operations whichever tile computes it, so
// results depend only on the kernel, not on batching or the split.
//
// ScanSelected is Scan over a list of row numbers (the rows a filter
// kept): runs of consecutive rows are scored in place and scattered ones
// gathered into a block first, so the same kernels score them and a
// filtered scan costs in proportion to the rows it keeps.
//
// Rescore is the exact half of an approximate scan: it scores a shortlist
// of candidate rows the way Scan scores every row, so scores from the
// shortlist equal an exact scan's bit for bit. Subpackage quant chooses
// such shortlists from int8 codes.
//
// Arena keeps a store's rows (float32, or int8 codes) in fixed-size
// chunks, so growing never copies them; Rows views them, and the scans
// read a chunk's rows as one contiguous block.
//
// It is the bottom of trawl's import graph: it must never import another
// trawl package, do I/O, or keep mutable package-level state. Everything a
// caller can vary (which Kernel runs) is a value passed in.
package vector
