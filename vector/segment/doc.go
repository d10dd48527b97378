// Package segment keeps float32 rows in memory-mapped segment files, so
// that a store's full-precision rows live in the page cache rather than
// the Go heap: the kernel keeps the rows scans touch and drops the rest
// under memory pressure.
//
// Each segment is a NumPy .npy file (format 1.0, '<f4', C order, shape
// (rows the file holds, dim)) that `router load` and numpy.load read as
// is; a file grows by doubling up to its segment's rows (rows past the
// last written are zeros), so a small collection's file stays small.
// Rows are written once, at the end of the segment being filled; an
// overwrite or a delete writes nothing in place but moves the row's slot,
// leaving a dead slot behind, and a segment less than half alive is
// compacted (its live rows copied to the end, the file removed), so the
// files hold at most about twice the live rows plus one segment.
//
// A set may also keep each row's int8 codes and norm (EnableCodes) in a
// codes file beside each segment, NNNNNN.codes.npy: a .npy structured
// array ('codes' int8 × dim, 'norm' float32) slot for slot with the rows,
// under the same append-only discipline, so a snapshot links it too and
// a restart copies codes instead of encoding every row. The package does
// not encode: the caller passes each row's codes with it.
//
// A writer may Prepare its next rows under its read lock, before it takes
// its write lock: the active file is grown to hold them, the next
// segment's file made, and their pages faulted in, so the writes under
// the lock only copy. The directory may then hold one file (with its
// codes file) that is no segment of the set yet.
//
// A Frozen view names the rows as they are (Manifest: the files, the
// rows written in each, the slot table) and makes them durable (Sync):
// a file's first rows never change once written, so a snapshot holds a
// hard link to each file and its manifest instead of a copy of the rows,
// and Restore reopens a set from such files (linked back, or copied from
// a peer's) and appends after them. A Set never reopens files on its own:
// Open removes what a previous process left in its directory. The
// package must never hold a row in the Go heap, nor import anything
// above vector.
package segment
