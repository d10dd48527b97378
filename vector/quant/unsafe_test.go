package quant

import "unsafe"

func unsafePointer(v []int8) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(v))) }

// allCodes is every row's codes back to back, to compare two Codes
// whatever their chunks.
func allCodes(c *Codes) []int8 {
	var out []int8
	for i := range c.Len() {
		out = append(out, c.Row(i)...)
	}
	return out
}
