package segment

import (
	"encoding/binary"
	"fmt"
)

// npyHeaderAlign is the alignment of the data in a .npy file: the format
// pads its header to a multiple of 64 bytes, which also keeps each
// mapped segment's rows 64-byte aligned for the SIMD kernels.
const npyHeaderAlign = 64

// npyHeader is the .npy (format 1.0) header of a C-order float32 array of
// shape (rows, dim) in the machine's byte order, padded to at least size
// bytes: a segment's header is sized for its largest shape, so it can be
// rewritten in place as the file grows.
func npyHeader(rows, dim, size int) []byte {
	return npyHeaderDescr("'"+float32Descr()+"'", fmt.Sprintf("(%d, %d)", rows, dim), size)
}

// Float32NpyHeader is the .npy (format 1.0) header of a C-order
// little-endian float32 array of shape (rows, dim), padded to 64 bytes:
// the header of .npy rows written for other readers (backups), whatever
// the machine's order.
func Float32NpyHeader(rows int64, dim int) []byte {
	return npyHeaderDescr("'<f4'", fmt.Sprintf("(%d, %d)", rows, dim), 0)
}

// Int8NpyHeader is the .npy (format 1.0) header of rows × dim int8 codes
// in C order (what a backup's codes file starts with).
func Int8NpyHeader(rows int64, dim int) []byte {
	return npyHeaderDescr("'|i1'", fmt.Sprintf("(%d, %d)", rows, dim), 0)
}

// Float32VectorNpyHeader is the .npy (format 1.0) header of n
// little-endian float32 (a backup's int8 steps).
func Float32VectorNpyHeader(n int) []byte {
	return npyHeaderDescr("'<f4'", fmt.Sprintf("(%d,)", n), 0)
}

// float32Descr is the .npy type of a float32 in the machine's order.
func float32Descr() string {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		return ">f4"
	}
	return "<f4"
}

// npyHeaderDescr is a .npy (format 1.0) header of a C-order array of
// type descr (a Python literal numpy.dtype accepts) and shape (a Python
// tuple), padded to at least size bytes.
func npyHeaderDescr(descr, shape string, size int) []byte {
	dict := fmt.Sprintf("{'descr': %s, 'fortran_order': False, 'shape': %s, }", descr, shape)
	// magic (6) + version (2) + header length (2) + dict + '\n', padded
	// with spaces to the alignment.
	total := 10 + len(dict) + 1
	total = max((total+npyHeaderAlign-1)/npyHeaderAlign*npyHeaderAlign, size)
	h := make([]byte, total)
	copy(h, "\x93NUMPY\x01\x00")
	binary.LittleEndian.PutUint16(h[8:], uint16(total-10))
	n := copy(h[10:], dict)
	for i := 10 + n; i < total-1; i++ {
		h[i] = ' '
	}
	h[total-1] = '\n'
	return h
}
