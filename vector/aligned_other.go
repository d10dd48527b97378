//go:build !linux

package vector

// adviseHugePages has no portable equivalent here; arenas use the
// default page size.
func adviseHugePages([]byte) {}
