package qdrantx

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/budget"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/vector"
)

// Distances maps Qdrant's distance names to trawl's metrics.
var Distances = map[string]vector.Metric{"Cosine": vector.Cosine, "Dot": vector.DotProduct, "Euclid": vector.Euclidean}

// DistanceName names a metric as Qdrant does.
func DistanceName(m vector.Metric) string {
	switch m {
	case vector.DotProduct:
		return "Dot"
	case vector.Euclidean:
		return "Euclid"
	}
	return "Cosine"
}

// NotFoundCollection is Qdrant's answer on a name that is no collection
// or alias.
func NotFoundCollection(name string) *wire.Error {
	return &wire.Error{Status: http.StatusNotFound, Code: wire.CodeNotFound, Msg: fmt.Sprintf("Collection `%s` doesn't exist!", name)}
}

// Resolve finds the collection (or alias) a points call acts on: Qdrant's
// 404 for an unknown one, the coordinator's 503 while it is being created.
func Resolve(ctx context.Context, co *coordinator.Coordinator, name string) (coordinator.Collection, error) {
	c, err := co.Collection(ctx, name)
	if coordinator.CodeOf(err) == coordinator.CodeCollectionNotFound {
		return coordinator.Collection{}, NotFoundCollection(name)
	}
	return c, err
}

// Exists is a collection-exists call: true for a collection or an alias
// of one (Qdrant resolves aliases here too), one still being created
// included.
func Exists(ctx context.Context, co *coordinator.Coordinator, name string) (bool, error) {
	_, err := co.Collection(ctx, name)
	switch coordinator.CodeOf(err) {
	case coordinator.CodeCollectionNotFound:
		return false, nil
	case coordinator.CodeUnavailable:
		return true, nil
	}
	return err == nil, err
}

// SettingsText says a collection's settings in Qdrant's terms, and
// trawl's index.
func SettingsText(s catalog.Settings) string {
	q := "no quantization"
	if s.Quantization == catalog.QuantInt8 {
		q = "scalar int8 quantization"
	}
	place := "in memory"
	if s.Float32 == catalog.Float32OnDisk {
		place = "on disk"
	}
	out := fmt.Sprintf("vectors of size %d and distance %s, %s, %s index, float32 %s", s.Dim, DistanceName(s.Metric), q, s.Index, place)
	if !s.HasUnnamed() {
		parts := make([]string, 0, len(s.Named))
		for _, name := range slices.Sorted(maps.Keys(s.Named)) {
			d := s.Named[name]
			parts = append(parts, fmt.Sprintf("%s (size %d, distance %s, quantization %s)", name, d.Dim, DistanceName(d.Metric), d.Quantization))
		}
		out = "named vectors " + strings.Join(parts, ", ")
	}
	if len(s.Sparse) > 0 {
		parts := make([]string, 0, len(s.Sparse))
		for _, name := range slices.Sorted(maps.Keys(s.Sparse)) {
			parts = append(parts, fmt.Sprintf("%s (modifier %s)", name, s.Sparse[name].Modifier))
		}
		out += ", sparse vectors " + strings.Join(parts, ", ")
	}
	return out
}

// Create creates a collection, or finds it created with these settings
// (both nil). A collection of that name with other settings is a 409 in
// Qdrant's words ("already exists", which the clients that create and
// catch a conflict look for), which also say what it holds.
func Create(ctx context.Context, co *coordinator.Coordinator, name string, want catalog.Settings) error {
	_, err := co.CreateCollection(ctx, name, want)
	if coordinator.CodeOf(err) != coordinator.CodeConflict {
		return err
	}
	have, lerr := co.Collection(ctx, name)
	if have.Name == "" || (lerr != nil && coordinator.CodeOf(lerr) != coordinator.CodeUnavailable) {
		return err
	}
	e := &wire.Error{Status: http.StatusConflict, Code: wire.CodeCatalogConflict}
	if have.Name != name {
		e.Msg = fmt.Sprintf("Can't create collection with name %s. Alias with the same name already exists (it points at `%s`)", name, have.Name)
		return e
	}
	e.Msg = fmt.Sprintf("Collection `%s` already exists! It holds %s; this create asks for %s. Delete it first to change its settings",
		name, SettingsText(have.Settings), SettingsText(want.Normalize()))
	return e
}

// Drop drops a collection (true), or finds none (false). As in Qdrant, the
// aliases that point at it go first, so a collection created again under
// the name does not inherit them. An alias's name is not a collection's:
// false.
func Drop(ctx context.Context, co *coordinator.Coordinator, name string) (bool, error) {
	if err := catalog.ValidName(name); err != nil {
		return false, nil
	}
	aliases, err := co.Aliases(ctx)
	if err != nil {
		return false, err
	}
	for _, a := range aliases {
		if a.Collection != name {
			continue
		}
		if err := co.DeleteAlias(ctx, a.Alias); err != nil {
			return false, err
		}
	}
	return co.DropCollection(ctx, name)
}

// Counts is what a collection's description counts: its points, and the
// points with a value under each declared payload index's field.
type Counts struct {
	Total  uint64
	Fields map[string]uint64
}

// CountAll counts c's points and, at the same time, the points with a
// value under each of c's declared payload-index fields. The summary is
// the total's, with the shards any field count missed added, so the
// answer is degraded when any count was.
func CountAll(ctx context.Context, co *coordinator.Coordinator, c coordinator.Collection, b budget.Budget, allowPartial bool) (Counts, fanout.Summary, []coordinator.ShardReport, error) {
	fields := slices.Sorted(maps.Keys(c.PayloadSchema))
	counts := make([]uint64, len(fields))
	sums := make([]fanout.Summary, len(fields))
	errs := make([]error, len(fields))
	var wg sync.WaitGroup
	for i, f := range fields {
		wg.Go(func() {
			flt, err := HasValue(f)
			if err != nil {
				return // a key no filter can name holds no values trawl can count
			}
			ans, err := co.Count(ctx, c, flt, b, allowPartial)
			counts[i], sums[i], errs[i] = ans.Count, ans.Summary, err
		})
	}
	ans, err := co.Count(ctx, c, nil, b, allowPartial)
	wg.Wait()
	out := Counts{Total: ans.Count, Fields: make(map[string]uint64, len(fields))}
	sum := ans.Summary
	for i, f := range fields {
		out.Fields[f] = counts[i]
		if err == nil && errs[i] != nil {
			err = errs[i]
		}
		for _, s := range sums[i].Unavailable {
			if !slices.Contains(sum.Unavailable, s) {
				sum.Unavailable = append(sum.Unavailable, s)
				if sum.ShardErrors == nil {
					sum.ShardErrors = map[string]fanout.Reason{}
				}
				sum.ShardErrors[s] = sums[i].ShardErrors[s]
			}
		}
		if errs[i] == nil && sums[i].ShardsTotal > 0 {
			sum.Coverage = min(sum.Coverage, sums[i].Coverage)
		}
	}
	return out, sum, ans.Shards, err
}

// HasValue is the filter of the points with a value under field (not
// missing, null or an empty list: what Qdrant's index on it holds).
func HasValue(field string) (*filter.Filter, error) {
	key, err := json.Marshal(field)
	if err != nil {
		return nil, err
	}
	return wire.ParseFilter([]byte(`{"must_not": [{"is_empty": {"key": ` + string(key) + `}}]}`))
}

// RemoveFailure is the error of a delete (by ids or by filter) that some
// shards refused: the status their errors add up to (wire.WriteStatus),
// their messages, and the shards it was applied on anyway. It is nil when
// every shard applied the delete.
func RemoveFailure(results []coordinator.ShardWrite) *wire.Error {
	return writeFailure(results, "delete")
}

// EditFailure is RemoveFailure for an edit (Coordinator.Edit): each
// shard applies its share all or nothing, and the message names those
// that applied theirs.
func EditFailure(results []coordinator.ShardWrite) *wire.Error {
	return writeFailure(results, "edit")
}

func writeFailure(results []coordinator.ShardWrite, what string) *wire.Error {
	var errs []*coordinator.Error
	var failed, applied []string
	for _, res := range results {
		if res.Err != nil {
			errs = append(errs, res.Err)
			failed = append(failed, res.Err.Msg)
		} else {
			applied = append(applied, res.Shard)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	msg := strings.Join(failed, " ")
	if len(applied) > 0 {
		msg += fmt.Sprintf(" The %s was applied on %s.", what, strings.Join(applied, ", "))
	}
	return &wire.Error{Status: wire.WriteStatus(errs), Msg: msg}
}

// Float32 is the float32 placement a create's vectors on_disk asks for:
// on_disk or in_memory when it is given, "" (the collection's default,
// catalog.DefaultFloat32) when it is not. Qdrant keeps vectors in memory
// unless on_disk is true; trawl's default for int8 collections is on disk.
func Float32(onDisk *bool) string {
	switch {
	case onDisk == nil:
		return ""
	case *onDisk:
		return catalog.Float32OnDisk
	}
	return catalog.Float32InMemory
}

// CheckDeleteVectors checks delete_vectors' names against a collection:
// at least one, each a named dense or sparse vector of it. The unnamed
// vector is refused (ErrDeleteVectors): a point cannot be without it.
func CheckDeleteVectors(sch coordinator.Schema, names []string, where string) error {
	if len(sch.Named) == 0 && len(sch.Sparse) == 0 {
		return wire.Invalid(ErrDeleteVectors)
	}
	if len(names) == 0 {
		return wire.Invalid(where + " names no vector to delete")
	}
	for i, name := range names {
		_, named := sch.Named[name]
		_, sparse := sch.Sparse[name]
		switch {
		case name == "" && sch.Dim > 0:
			return wire.Invalid(fmt.Sprintf("%s[%d]: %s", where, i, ErrDeleteVectors))
		case !named && !sparse:
			return wire.Invalid(fmt.Sprintf("%s[%d]: the collection has no named or sparse vector %q", where, i, name))
		}
	}
	return nil
}
