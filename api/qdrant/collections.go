package qdrant

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/fanout"
	"github.com/trawl-search/trawl/filter"
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
// collection or an alias of one, one still being created included.
func (h *Handler) collectionExists(w http.ResponseWriter, r *http.Request) {
	ok, err := qdrantx.Exists(r.Context(), h.cfg.Coordinator, chi.URLParam(r, "collection"))
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	answer(w, r, map[string]bool{"exists": ok}, nil)
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
		// Vectors is a vectorParamsOut for the unnamed vector, or a map
		// of them by name for a collection of named vectors.
		Vectors any `json:"vectors"`
		// SparseVectors are the sparse vectors by name, left out when
		// there are none.
		SparseVectors          map[string]sparseParamsOut `json:"sparse_vectors,omitempty"`
		ShardNumber            int                        `json:"shard_number"`
		ReplicationFactor      int                        `json:"replication_factor"`
		WriteConsistencyFactor int                        `json:"write_consistency_factor"`
		OnDiskPayload          bool                       `json:"on_disk_payload"`
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

// vectorParamsOut is Qdrant's VectorParams in collection info.
type vectorParamsOut struct {
	Size     int    `json:"size"`
	Distance string `json:"distance"`
	// OnDisk is whether the float32 rows are on disk.
	OnDisk bool `json:"on_disk"`
	// QuantizationConfig is a named vector's int8, left out otherwise.
	QuantizationConfig *quantizationConfig `json:"quantization_config,omitempty"`
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
	DataType string         `json:"data_type"`
	Params   map[string]any `json:"params,omitempty"`
	Points   uint64         `json:"points"`
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
		h.http.Error(w, r, qdrantx.NotFoundCollection(name))
		return
	case coordinator.CodeUnavailable:
		if c.Name == "" {
			h.http.Fail(w, r, err, nil)
			return
		}
		info := h.describe(c)
		info.Status = "yellow"
		if c.Restoring {
			// Not Qdrant's (it has no restoring state): grey, not ready
			// to serve and not optimizing either.
			info.Status = "grey"
		}
		for f, t := range c.PayloadSchema {
			info.PayloadSchema[f] = payloadIndexInfo{DataType: filter.SchemaType(t), Params: qdrantx.TextParams(t)}
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
	var counts qdrantx.Counts
	sg, ok := h.gather(w, r, p, func(ctx context.Context) (fanout.Summary, []coordinator.ShardReport, error) {
		var sum fanout.Summary
		var shards []coordinator.ShardReport
		var err error
		counts, sum, shards, err = qdrantx.CountAll(ctx, h.cfg.Coordinator, c, p.budget, p.allowPartial)
		return sum, shards, err
	})
	if !ok {
		return
	}
	if sg.Degraded {
		info.Status = "yellow"
	}
	info.PointsCount = counts.Total
	for f, t := range c.PayloadSchema {
		info.PayloadSchema[f] = payloadIndexInfo{DataType: filter.SchemaType(t), Params: qdrantx.TextParams(t), Points: counts.Fields[f]}
	}
	answer(w, r, info, &sg)
}

// describe is what GET /collections/{name} says of c without reading the
// shards.
func (h *Handler) describe(c coordinator.Collection) collectionInfo {
	shards, replicas := h.cfg.Coordinator.Shape()
	info := collectionInfo{Status: "green", OptimizerStatus: "ok", SegmentsCount: shards, PayloadSchema: map[string]payloadIndexInfo{}}
	if len(c.Settings.Named) > 0 {
		named := make(map[string]vectorParamsOut, len(c.Settings.Named))
		for name, d := range c.Settings.Named {
			p := vectorParamsOut{Size: d.Dim, Distance: qdrantx.DistanceName(d.Metric)}
			if d.Quantization == catalog.QuantInt8 {
				p.QuantizationConfig = &quantizationConfig{}
				p.QuantizationConfig.Scalar.Type = "int8"
			}
			named[name] = p
		}
		info.Config.Params.Vectors = named
	} else {
		info.Config.Params.Vectors = vectorParamsOut{Size: c.Settings.Dim, Distance: qdrantx.DistanceName(c.Settings.Metric),
			OnDisk: c.Settings.Float32 == catalog.Float32OnDisk}
	}
	info.Config.Params.ShardNumber, info.Config.Params.ReplicationFactor = shards, replicas
	info.Config.Params.WriteConsistencyFactor = 1
	for name, sp := range c.Settings.Sparse {
		if info.Config.Params.SparseVectors == nil {
			info.Config.Params.SparseVectors = map[string]sparseParamsOut{}
		}
		out := sparseParamsOut{}
		if sp.Modifier == catalog.ModifierIDF {
			out.Modifier = "idf"
		}
		info.Config.Params.SparseVectors[name] = out
	}
	if c.Settings.Quantization == catalog.QuantInt8 {
		info.Config.QuantizationConfig = &quantizationConfig{}
		info.Config.QuantizationConfig.Scalar.Type = "int8"
	}
	return info
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
	if err := qdrantx.Create(r.Context(), h.cfg.Coordinator, chi.URLParam(r, "collection"), s); err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	answer(w, r, true, nil)
}

// updateCollection is PATCH /collections/{name} (a name or an alias):
// switches int8 codes on or off online, on every replica at one catalog
// entry; members that restate the collection's settings or tune what
// trawl does not have change nothing; each change trawl cannot make is a
// 400 naming its member (decodeUpdate, qdrantx.ApplyUpdate).
func (h *Handler) updateCollection(w http.ResponseWriter, r *http.Request) {
	u, _, ok := decodeRequest(h, w, r, decodeUpdate)
	if !ok {
		return
	}
	if err := qdrantx.ApplyUpdate(r.Context(), h.cfg.Coordinator, chi.URLParam(r, "collection"), u); err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	answer(w, r, true, nil)
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
	dropped, err := qdrantx.Drop(r.Context(), h.cfg.Coordinator, chi.URLParam(r, "collection"))
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	answer(w, r, dropped, nil)
}
