// Package sparse is one replica's inverted index of one named sparse
// vector: for each term (a u32 dimension) the postings (row, value) of
// the rows whose vector holds it, and for each row its own terms, so a
// row can be removed, moved or returned without scanning any list.
//
// Rows are the store's row numbers (package store moves the last row into
// a deleted row's place, and Move follows it), so a filter's selection
// (filter/index, by row) restricts a search directly.
//
// Search is exact: every posting of every query term is read, and the
// score of a row is Σ over the query's terms of query value × weight ×
// row value, summed in ascending term order in float32, so a brute-force
// evaluation in that order gives the same bits. Rows sharing no term with
// the query are not hits (as in Qdrant).
//
// Memory: a posting costs 8 bytes in its term's list (row u32, value
// f32) and 12 bytes in its row's term list (term u32, value f32, position
// u32), 20 bytes in all, plus per term a map entry and a slice header.
// The snapshot form (AppendBinary) is the postings alone, 8 bytes each
// plus two varints a term; Decode restores the row lists from them in one
// pass, without inserting any row.
package sparse
