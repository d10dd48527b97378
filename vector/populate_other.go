//go:build !linux

package vector

// PopulateWrite is a hint Linux alone takes here; elsewhere pages fault
// when first written, as without it.
func PopulateWrite[T any]([]T) {}
