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
// The files are a cache of state the caller can rebuild (a replica's raft
// snapshot and log): they are never fsynced and a Set never reopens files
// a previous process left; Open removes them. The package must never hold
// a row in the Go heap, nor import anything above vector.
package segment
