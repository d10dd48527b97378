package placement

import (
	"crypto/sha256"
	"encoding/hex"
	"hash/fnv"
	"slices"
	"strings"
)

// Table maps ids to shard names.
type Table struct {
	names       []string // sorted
	fingerprint string
}

// New builds the table for a set of shard names in any order.
func New(names []string) Table {
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	sum := sha256.Sum256([]byte(strings.Join(sorted, "\n")))
	return Table{names: sorted, fingerprint: hex.EncodeToString(sum[:8])}
}

// Fingerprint identifies the shard list: equal for the same names in any
// order, different when a shard is added, removed or renamed.
func (t Table) Fingerprint() string { return t.fingerprint }

// Home returns the name of the shard that owns id.
func (t Table) Home(id string) string {
	h := fnv.New64a()
	h.Write([]byte(id))
	return t.names[Jump(h.Sum64(), len(t.names))]
}

// Jump is jump consistent hash: a bucket in [0, buckets) for key, moving
// only 1/n of keys when the n-th bucket is added.
func Jump(key uint64, buckets int) int {
	var b, j int64 = -1, 0
	for j < int64(buckets) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int(b)
}
