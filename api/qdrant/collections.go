package qdrant

import (
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/trawl-search/trawl/api/internal/wire"
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

func (h *Handler) listCollections(w http.ResponseWriter, r *http.Request) {
	answer(w, r, map[string][]collectionDescription{"collections": {{Name: h.collection()}}}, nil)
}

func (h *Handler) collectionExists(w http.ResponseWriter, r *http.Request) {
	answer(w, r, map[string]bool{"exists": chi.URLParam(r, "collection") == h.collection()}, nil)
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
// exact scan), segments are the shards.
type collectionInfo struct {
	Status              string           `json:"status"`
	OptimizerStatus     string           `json:"optimizer_status"`
	IndexedVectorsCount uint64           `json:"indexed_vectors_count"`
	PointsCount         uint64           `json:"points_count"`
	SegmentsCount       int              `json:"segments_count"`
	Config              collectionConfig `json:"config"`
	PayloadSchema       struct{}         `json:"payload_schema"`
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
	QuantizationConfig *struct{} `json:"quantization_config"`
}

// getCollection is GET /collections/{name}: the schema and shape, and
// the points count from a count fan-out (so a count missing a shard is
// degraded: status yellow, and scatter_gather says which).
func (h *Handler) getCollection(w http.ResponseWriter, r *http.Request) {
	p, err := h.routeParams(r)
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	count, sg, ok := h.countPoints(w, r, p, nil)
	if !ok {
		return
	}
	sch := schema(r)
	shards, replicas := h.cfg.Coordinator.Shape()
	info := collectionInfo{Status: "green", OptimizerStatus: "ok", PointsCount: count, SegmentsCount: shards}
	if sg.Degraded {
		info.Status = "yellow"
	}
	info.Config.Params.Vectors.Size, info.Config.Params.Vectors.Distance = sch.Dim, distanceOf(sch.Metric)
	info.Config.Params.ShardNumber, info.Config.Params.ReplicationFactor = shards, replicas
	info.Config.Params.WriteConsistencyFactor = 1
	answer(w, r, info, &sg)
}

// createCollection is PUT /collections/{name}: the one collection exists
// already, so a create that asks for what it is succeeds (idempotently,
// storing nothing) and anything else is refused, naming the difference.
func (h *Handler) createCollection(w http.ResponseWriter, r *http.Request) {
	body, err := h.http.ReadBody(w, r)
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	if _, err := h.routeParams(r); err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	if name := chi.URLParam(r, "collection"); name != h.collection() {
		h.http.Fail(w, r, wire.Invalid(fmt.Sprintf(
			"trawl serves one collection, `%s` (router serve --collection), and cannot create `%s`; filter on a payload key to keep data sets apart",
			h.collection(), name)), nil)
		return
	}
	existing, err := h.cfg.Coordinator.Collection(r.Context(), h.collection())
	if err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	if err := checkCreate(body, existing.Schema(), h.collection()); err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	answer(w, r, true, nil)
}
