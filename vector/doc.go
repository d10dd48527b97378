// Package vector scores float32 vectors: dot product, squared Euclidean
// distance and normalisation, with SIMD implementations chosen from the
// CPU's features, plus the top-k selection and merge that a scan needs.
//
// It is the bottom of trawl's import graph: it must never import another
// trawl package, do I/O, or keep mutable package-level state. Everything a
// caller can vary (which Kernel runs) is a value passed in.
package vector
