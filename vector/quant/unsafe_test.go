package quant

import "unsafe"

func unsafePointer(v []int8) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(v))) }
