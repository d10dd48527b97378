package raftgrpc

import (
	"testing"

	"github.com/hashicorp/raft"
)

// BenchmarkEncodeAppend encodes an AppendEntries of three 600 kB entries
// (a bulk load's batches, 1536-D rows) as a leader's pipeline does, with
// its buffer sized up front (sized) and, for comparison, grown from
// nothing (grown). Compare B/op:
//
//	go test -run XXX -bench EncodeAppend -benchmem ./shard/raftgrpc
func BenchmarkEncodeAppend(b *testing.B) {
	req := &raft.AppendEntriesRequest{Term: 3, PrevLogEntry: 10, PrevLogTerm: 3, LeaderCommitIndex: 10}
	for i := range 3 {
		req.Entries = append(req.Entries, &raft.Log{Index: uint64(11 + i), Term: 3, Type: raft.LogCommand, Data: make([]byte, 600_000)})
	}
	for _, bc := range []struct {
		name string
		size int
	}{{"sized", appendSize(req.Entries) + 256}, {"grown", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := encodeMsgpackSized(req, bc.size); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
