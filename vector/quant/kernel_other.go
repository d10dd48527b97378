//go:build !amd64 || purego

package quant

// platformKernels has no SIMD kernels to offer off amd64 (or with the
// purego tag); the generic kernel is always there.
func platformKernels() []Kernel { return nil }

// tiler is never built here: kernels without one score pair by pair.
type tiler struct{}

func (*tiler) single(*int8, *int8, int) int32 { panic("quant: no tile kernels on this platform") }

func (*tiler) one(*int8, *[4]*int8, int, *[4]int32) {
	panic("quant: no tile kernels on this platform")
}

func (*tiler) two(*[2]*uint8, *[4]*int8, int, *[8]int32, uintptr) {
	panic("quant: no tile kernels on this platform")
}
