package coordinator

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/vector"
)

// CheckNamedQuery checks which dense vector a query (not a sparse one)
// searches, before anything reaches a shard: a named vector the
// collection has, with a query vector of its size, or the unnamed one
// when the collection has it. A query by a named vector takes its
// vector as given: like_id and recommendations read a stored point's
// unnamed vector, so they are refused with a name.
func CheckNamedQuery(coll Collection, q Query) error {
	if q.Using == "" {
		if !coll.Settings.HasUnnamed() {
			return fmt.Errorf("the collection has no unnamed vector: name one of its vectors (%s) with using", coll.Schema().NamedList())
		}
		return nil
	}
	d, ok := coll.Settings.Named[q.Using]
	if !ok {
		if coll.Settings.HasUnnamed() {
			return fmt.Errorf("the collection has no named vector %q: its one dense vector is unnamed", q.Using)
		}
		return fmt.Errorf("the collection has no named vector %q (its named vectors: %s)", q.Using, coll.Schema().NamedList())
	}
	if q.LikeID != "" || q.Recommend != nil {
		return errors.New("a query by a stored point's vector (like_id, recommend) is not supported with a named vector")
	}
	if len(q.Vector) != d.Dim {
		return fmt.Errorf("vector %q has %d dimensions, want %d", q.Using, len(q.Vector), d.Dim)
	}
	return nil
}

// QueryMetric is the metric a query's scores are in: a sparse query's
// are dot products, a named vector's its own metric's, any other the
// collection's.
func QueryMetric(set catalog.Settings, q Query) vector.Metric {
	if q.Sparse != nil {
		return vector.DotProduct
	}
	if d, ok := set.Named[q.Using]; ok {
		return d.Metric
	}
	return set.Metric
}

// checkBackupNamed refuses a backup of a collection of named dense or
// sparse vectors: the backup format holds one .npy of unnamed rows and
// the payloads per shard, so a backup would silently drop every named
// and sparse vector (and a restore would create the collection without
// them).
func checkBackupNamed(coll Collection) error {
	if len(coll.Settings.Named) > 0 {
		return errorf(CodeInvalid, nil, "collection `%s` holds named vectors (%s), which backups do not hold yet: a backup would drop them, so none is taken",
			coll.Name, coll.Schema().NamedList())
	}
	if len(coll.Settings.Sparse) > 0 {
		return errorf(CodeInvalid, nil, "collection `%s` holds sparse vectors (%s), which backups do not hold yet: a backup would drop them, so none is taken",
			coll.Name, strings.Join(slices.Sorted(maps.Keys(coll.Settings.Sparse)), ", "))
	}
	return nil
}
