package qdrant

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"

	"github.com/go-chi/chi/v5"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/filter"
	"github.com/trawl-search/trawl/vector"
)

func (h *Handler) root(w http.ResponseWriter, r *http.Request) {
	wire.WriteJSON(w, http.StatusOK, map[string]string{
		"title":   "trawl - scatter-gather vector search router (Qdrant-compatible REST subset)",
		"version": Version,
	})
}

type collectionDescription struct {
	Name string `json:"name"`
}

// listCollections is GET /collections: every collection of the catalog,
// by name, those still being created too (as Qdrant lists a collection
// whose shards are still initializing).
func (h *Handler) listCollections(w http.ResponseWriter, r *http.Request) {
	colls, err := h.cfg.Coordinator.Collections(r.Context())
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	out := make([]collectionDescription, 0, len(colls))
	for _, c := range colls {
		if h.http.Readable(r, c.Name) {
			out = append(out, collectionDescription{Name: c.Name})
		}
	}
	answer(w, r, map[string][]collectionDescription{"collections": out}, nil)
}

// collectionExists is GET /collections/{name}/exists: true for a
// collection or an alias of one (Qdrant resolves aliases here too), one
// still being created included.
func (h *Handler) collectionExists(w http.ResponseWriter, r *http.Request) {
	_, err := h.cfg.Coordinator.Collection(r.Context(), chi.URLParam(r, "collection"))
	switch coordinator.CodeOf(err) {
	case coordinator.CodeCollectionNotFound:
		answer(w, r, map[string]bool{"exists": false}, nil)
	case coordinator.CodeUnavailable:
		answer(w, r, map[string]bool{"exists": true}, nil)
	default:
		if err != nil {
			h.http.Fail(w, r, err, nil)
			return
		}
		answer(w, r, map[string]bool{"exists": true}, nil)
	}
}

// distanceOf names a metric as Qdrant does.
func distanceOf(m vector.Metric) string {
	switch m {
	case vector.DotProduct:
		return "Dot"
	case vector.Euclidean:
		return "Euclid"
	}
	return "Cosine"
}

// Collection info, in the shape of Qdrant's CollectionInfo. trawl has no
// HNSW graph, segments or optimizer; the required fields say so as
// Qdrant's own values would: m 0 is Qdrant's "no graph" (every search an
// exact scan, or trawl's int8 and IVF scans re-scored in float32),
// segments are the shards.
type collectionInfo struct {
	Status              string                      `json:"status"`
	OptimizerStatus     string                      `json:"optimizer_status"`
	IndexedVectorsCount uint64                      `json:"indexed_vectors_count"`
	PointsCount         uint64                      `json:"points_count"`
	SegmentsCount       int                         `json:"segments_count"`
	Config              collectionConfig            `json:"config"`
	PayloadSchema       map[string]payloadIndexInfo `json:"payload_schema"`
}

type collectionConfig struct {
	Params struct {
		Vectors struct {
			Size     int    `json:"size"`
			Distance string `json:"distance"`
		} `json:"vectors"`
		ShardNumber            int  `json:"shard_number"`
		ReplicationFactor      int  `json:"replication_factor"`
		WriteConsistencyFactor int  `json:"write_consistency_factor"`
		OnDiskPayload          bool `json:"on_disk_payload"`
	} `json:"params"`
	HNSWConfig struct {
		M                 int `json:"m"`
		EfConstruct       int `json:"ef_construct"`
		FullScanThreshold int `json:"full_scan_threshold"`
	} `json:"hnsw_config"`
	OptimizerConfig struct {
		DefaultSegmentNumber int `json:"default_segment_number"`
		FlushIntervalSec     int `json:"flush_interval_sec"`
	} `json:"optimizer_config"`
	QuantizationConfig *quantizationConfig `json:"quantization_config"`
}

// quantizationConfig is Qdrant's ScalarQuantization, the one kind trawl
// has.
type quantizationConfig struct {
	Scalar struct {
		Type string `json:"type"`
	} `json:"scalar"`
}

// payloadIndexInfo is Qdrant's PayloadIndexInfo: the declared type, and
// how many points have a value under the key.
type payloadIndexInfo struct {
	DataType string `json:"data_type"`
	Points   uint64 `json:"points"`
}

// getCollection is GET /collections/{name} (a name or an alias): the
// settings in Qdrant's terms; points_count from a count fan-out, and each
// declared payload index's points from one more, run at once (so a count
// missing a shard is degraded: status yellow, and scatter_gather says
// which). A collection still being created is yellow, with no points and
// no fan-out.
func (h *Handler) getCollection(w http.ResponseWriter, r *http.Request) {
	p, err := h.routeParams(r)
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	name := chi.URLParam(r, "collection")
	c, err := h.cfg.Coordinator.Collection(r.Context(), name)
	switch coordinator.CodeOf(err) {
	case coordinator.CodeCollectionNotFound:
		h.http.Error(w, r, notFoundCollection(name))
		return
	case coordinator.CodeUnavailable:
		if c.Name == "" {
			h.http.Fail(w, r, err, nil)
			return
		}
		info := h.describe(c)
		info.Status = "yellow"
		for f, t := range c.PayloadSchema {
			info.PayloadSchema[f] = payloadIndexInfo{DataType: t}
		}
		answer(w, r, info, nil)
		return
	}
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), collKey, c))
	info := h.describe(c)
	fields := slices.Sorted(maps.Keys(c.PayloadSchema))
	counts := make([]uint64, len(fields))
	sg, ok := h.gather(w, r, p, func(ctx context.Context) (fanout.Summary, []coordinator.ShardReport, error) {
		return h.countAll(ctx, c, p, fields, counts, &info.PointsCount)
	})
	if !ok {
		return
	}
	if sg.Degraded {
		info.Status = "yellow"
	}
	for i, f := range fields {
		info.PayloadSchema[f] = payloadIndexInfo{DataType: c.PayloadSchema[f], Points: counts[i]}
	}
	answer(w, r, info, &sg)
}

// describe is what GET /collections/{name} says of c without reading the
// shards.
func (h *Handler) describe(c coordinator.Collection) collectionInfo {
	shards, replicas := h.cfg.Coordinator.Shape()
	info := collectionInfo{Status: "green", OptimizerStatus: "ok", SegmentsCount: shards, PayloadSchema: map[string]payloadIndexInfo{}}
	info.Config.Params.Vectors.Size, info.Config.Params.Vectors.Distance = c.Settings.Dim, distanceOf(c.Settings.Metric)
	info.Config.Params.ShardNumber, info.Config.Params.ReplicationFactor = shards, replicas
	info.Config.Params.WriteConsistencyFactor = 1
	if c.Settings.Quantization == catalog.QuantInt8 {
		info.Config.QuantizationConfig = &quantizationConfig{}
		info.Config.QuantizationConfig.Scalar.Type = "int8"
	}
	return info
}

// countAll counts c's points into total and, at the same time, the points
// with a value under each field into counts. The summary is the total's,
// with the shards any field count missed added, so the answer is
// degraded when any count was.
func (h *Handler) countAll(ctx context.Context, c coordinator.Collection, p routeParams, fields []string, counts []uint64, total *uint64) (fanout.Summary, []coordinator.ShardReport, error) {
	sums := make([]fanout.Summary, len(fields))
	errs := make([]error, len(fields))
	var wg sync.WaitGroup
	for i, f := range fields {
		wg.Go(func() {
			flt, err := hasValue(f)
			if err != nil {
				return // a key no filter can name holds no values trawl can count
			}
			ans, err := h.cfg.Coordinator.Count(ctx, c, flt, p.budget, p.allowPartial)
			counts[i], sums[i], errs[i] = ans.Count, ans.Summary, err
		})
	}
	ans, err := h.cfg.Coordinator.Count(ctx, c, nil, p.budget, p.allowPartial)
	wg.Wait()
	*total = ans.Count
	sum := ans.Summary
	for i := range fields {
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
	return sum, ans.Shards, err
}

// hasValue is the filter of the points with a value under field (not
// missing, null or an empty list: what Qdrant's index on it holds).
func hasValue(field string) (*filter.Filter, error) {
	key, err := json.Marshal(field)
	if err != nil {
		return nil, err
	}
	return wire.ParseFilter([]byte(`{"must_not": [{"is_empty": {"key": ` + string(key) + `}}]}`))
}

// createCollection is PUT /collections/{name}: creates the collection,
// or finds it created with these settings (both true). A collection of
// that name with other settings is a 409 in Qdrant's words, which also
// say what it holds; 503 while the create has not reached every shard
// (repeating it completes it).
func (h *Handler) createCollection(w http.ResponseWriter, r *http.Request) {
	s, _, ok := decodeRequest(h, w, r, decodeCreate)
	if !ok {
		return
	}
	name := chi.URLParam(r, "collection")
	_, err := h.cfg.Coordinator.CreateCollection(r.Context(), name, s)
	if coordinator.CodeOf(err) == coordinator.CodeConflict {
		err = h.conflict(r.Context(), name, s, err)
	}
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	answer(w, r, true, nil)
}

// conflict words a refused create as Qdrant does ("already exists"),
// which the clients that create and catch a conflict look for, and says
// what exists.
func (h *Handler) conflict(ctx context.Context, name string, want catalog.Settings, err error) error {
	have, lerr := h.cfg.Coordinator.Collection(ctx, name)
	if have.Name == "" || (lerr != nil && coordinator.CodeOf(lerr) != coordinator.CodeUnavailable) {
		return err
	}
	e := &wire.Error{Status: http.StatusConflict, Code: wire.CodeConflict}
	if have.Name != name {
		e.Msg = fmt.Sprintf("Can't create collection with name %s. Alias with the same name already exists (it points at `%s`)", name, have.Name)
		return e
	}
	e.Msg = fmt.Sprintf("Collection `%s` already exists! It holds %s; this create asks for %s. Delete it first to change its settings",
		name, settingsText(have.Settings), settingsText(want.Normalize()))
	return e
}

// settingsText says a collection's settings in Qdrant's terms, and
// trawl's index.
func settingsText(s catalog.Settings) string {
	q := "no quantization"
	if s.Quantization == catalog.QuantInt8 {
		q = "scalar int8 quantization"
	}
	return fmt.Sprintf("vectors of size %d and distance %s, %s, %s index", s.Dim, distanceOf(s.Metric), q, s.Index)
}

// deleteCollection is DELETE /collections/{name}: drops the collection
// (true), or finds none (false). As in Qdrant, the aliases that point at
// it go first, so a collection created again under the name does not
// inherit them. An alias's name is not a collection's: false.
func (h *Handler) deleteCollection(w http.ResponseWriter, r *http.Request) {
	if _, err := h.routeParams(r); err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	name := chi.URLParam(r, "collection")
	if err := catalog.ValidName(name); err != nil {
		answer(w, r, false, nil)
		return
	}
	aliases, err := h.cfg.Coordinator.Aliases(r.Context())
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	for _, a := range aliases {
		if a.Collection != name {
			continue
		}
		if err := h.cfg.Coordinator.DeleteAlias(r.Context(), a.Alias); err != nil {
			h.http.Fail(w, r, err, nil)
			return
		}
	}
	dropped, err := h.cfg.Coordinator.DropCollection(r.Context(), name)
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	answer(w, r, dropped, nil)
}
