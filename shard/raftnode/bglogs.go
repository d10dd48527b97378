package raftnode

import (
	"github.com/hashicorp/raft"

	"github.com/trawl-search/trawl/internal/cpuprio"
)

// backgroundLogs stores log entries on a worker of lower CPU priority:
// storing a bulk load's entries (bolt's page writes, not the fsync wait)
// was a quarter of a replica's CPU, and it need not run before a search.
// Reads pass through: raft reads entries to replicate them, which a slow
// read would only delay further.
type backgroundLogs struct {
	raft.LogStore
	w *cpuprio.Worker
}

func (b backgroundLogs) StoreLog(l *raft.Log) (err error) {
	b.w.Do(func() { err = b.LogStore.StoreLog(l) })
	return err
}

func (b backgroundLogs) StoreLogs(ls []*raft.Log) (err error) {
	b.w.Do(func() { err = b.LogStore.StoreLogs(ls) })
	return err
}
