package qdrantx

import (
	"context"
	"fmt"
	"strings"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
)

// Update is what an update of a collection (REST PATCH
// /collections/{name}, gRPC Collections/Update) asks of the settings
// trawl keeps, decoded from either wire; nil: left as it is. Members that
// tune what trawl does not have (HNSW, optimizers, on_disk_payload) are
// accepted by the decoders and are not here.
type Update struct {
	// Int8 is quantization_config: scalar int8 (true) or Disabled (false).
	// Where is the member that asked, for errors.
	Int8      *bool
	Int8Where string
	// OnDisk is vectors.on_disk.
	OnDisk *bool
	// ReplicationFactor and WriteConsistencyFactor are params' members of
	// those names: they may only restate what the deployment has.
	ReplicationFactor      *uint64
	WriteConsistencyFactor *uint64
}

// SetInt8 records a quantization_config asked at where, refusing two
// members that ask for different ones.
func (u *Update) SetInt8(on bool, where string) error {
	if u.Int8 != nil && *u.Int8 != on {
		return wire.Invalid(fmt.Sprintf("%s and %s ask for different quantizations", u.Int8Where, where))
	}
	u.Int8, u.Int8Where = &on, where
	return nil
}

// ApplyUpdate applies u to the collection name resolves to (an alias
// too, as Qdrant resolves it): the quantization of a flat collection
// switches online, on every replica at one log entry; the rest must
// restate what the collection has, and each member that asks for a change
// trawl cannot make is a 400 naming it. An update that changes nothing
// is answered true, as Qdrant answers it.
func ApplyUpdate(ctx context.Context, co *coordinator.Coordinator, name string, u Update) error {
	coll, err := Resolve(ctx, co, name)
	if err != nil {
		return err
	}
	s := coll.Settings
	var refused []string
	if u.OnDisk != nil && Float32(u.OnDisk) != s.Float32 {
		refused = append(refused, fmt.Sprintf("vectors.on_disk cannot change: the float32 vectors stay %s, where the collection was created to keep them",
			map[bool]string{true: "on disk", false: "in memory"}[s.Float32 == catalog.Float32OnDisk]))
	}
	if u.Int8 != nil {
		want := catalog.QuantNone
		if *u.Int8 {
			want = catalog.QuantInt8
		}
		if s.Index == catalog.IndexIVF && want != catalog.QuantInt8 {
			refused = append(refused, u.Int8Where+" cannot be disabled: the collection's ivf index is made of int8 codes")
		} else {
			s.Quantization = want
		}
	}
	_, replicas := co.Shape()
	if f := u.ReplicationFactor; f != nil && *f != uint64(replicas) {
		refused = append(refused, fmt.Sprintf("params.replication_factor cannot change: each shard has the %d replicas the deployment runs", replicas))
	}
	if f := u.WriteConsistencyFactor; f != nil && *f != 1 {
		refused = append(refused, "params.write_consistency_factor cannot change: a write is acknowledged once its shard's log commits it")
	}
	if len(refused) > 0 {
		return wire.Invalid(strings.Join(refused, "; "))
	}
	_, err = co.UpdateCollection(ctx, coll, s)
	return err
}
