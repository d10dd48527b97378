//go:build !amd64 || purego

package vector

// platformKernels has no SIMD kernels to offer off amd64 (or with the
// purego tag); the generic kernel is always there.
func platformKernels() []Kernel { return nil }

// tiler is never built here: kernels without one score pair by pair.
type tiler struct{ queries, wide int }

func (t *tiler) single(Metric, *float32, *float32, int) float32 {
	panic("vector: no tile kernels on this platform")
}

func (t *tiler) one(Metric, *float32, *[4]*float32, int, *[4]float32) {
	panic("vector: no tile kernels on this platform")
}

func (t *tiler) many(Metric, *[4]*float32, *[4]*float32, int, *[16]float32, uintptr, uintptr) {
	panic("vector: no tile kernels on this platform")
}

func (t *tiler) six(Metric, *[6]*float32, *[4]*float32, int, *[24]float32, uintptr, uintptr) {
	panic("vector: no tile kernels on this platform")
}
