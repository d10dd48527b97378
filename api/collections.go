package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/catalog"
	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/placement"
	"github.com/trawl-search/trawl/vector"
)

// The collection routes (DESIGN.md, "Collections"): list, create, show
// and drop. Their answers carry a collection's settings in the shape
// /cluster/status lists them (collectionSettings).

// States of a collection.
const (
	stateReady    = "ready"
	stateCreating = "creating"
	// stateRestoring: a restore is filling it; it answers 503 until done.
	stateRestoring = "restoring"
)

type listedCollection struct {
	collectionSettings
	State string `json:"state"`
}

type listResponse struct {
	Collections []listedCollection `json:"collections"`
}

type createResponse struct {
	collectionSettings
	Created bool `json:"created"`
	// Slots is the collection's hash slot count (0: created before
	// slots, placed by the shard list).
	Slots int `json:"slots"`
}

type dropResponse struct {
	Name    string `json:"name"`
	Deleted bool   `json:"deleted"`
}

type collectionShard struct {
	Name string `json:"name"`
	// Slots is how many of the collection's hash slots its map gives
	// the shard.
	Slots    int          `json:"slots"`
	Answered bool         `json:"answered"`
	DocCount uint64       `json:"doc_count"`
	Bytes    uint64       `json:"bytes"`
	Index    *indexStatus `json:"index"`
}

type collectionResponse struct {
	collectionSettings
	// Slots is the hash slot count (0: created before slots, placed by
	// the shard list); SlotMapEpoch the epoch of its slot map.
	Slots        int    `json:"slots"`
	SlotMapEpoch uint64 `json:"slot_map_epoch"`
	State        string `json:"state"`
	// LackingShards are the shards that do not hold the collection yet
	// (state creating).
	LackingShards []string `json:"lacking_shards"`
	// Degraded: a shard did not answer, so doc_count and bytes miss its
	// part.
	Degraded bool              `json:"degraded"`
	DocCount uint64            `json:"doc_count"`
	Bytes    uint64            `json:"bytes"`
	Shards   []collectionShard `json:"shards"`
}

// listCollections is GET /v1/collections: the collections the key may
// read, by name, with their settings and state.
func (s *Server) listCollections(w http.ResponseWriter, r *http.Request) {
	colls, err := s.cfg.Coordinator.Collections(r.Context())
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	out := listResponse{Collections: []listedCollection{}}
	for _, c := range colls {
		if !s.http.Readable(r, c.Name) {
			continue
		}
		state := stateReady
		switch _, err := s.cfg.Coordinator.Collection(r.Context(), c.Name); coordinator.CodeOf(err) {
		case coordinator.CodeCollectionNotFound:
			continue // dropped since the listing
		case coordinator.CodeUnavailable:
			state = stateCreating
		}
		if c.Restoring {
			state = stateRestoring
		}
		out.Collections = append(out.Collections, listedCollection{collectionSettings: settingsOf(c), State: state})
	}
	wire.WriteJSON(w, http.StatusOK, out)
}

// createCollection is PUT /v1/collections/{collection}: 200 with the
// settings as stored and whether this request created it (a repeat with
// equal settings is a no-op), 409 for other settings, 503 while the
// create has not reached every shard (repeating it completes it).
func (s *Server) createCollection(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "collection")
	if err := catalog.ValidName(name); err != nil {
		s.http.Fail(w, r, wire.Invalid(err.Error()), nil)
		return
	}
	body, err := s.http.ReadBody(w, r)
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	settings, slots, err := decodeCreate(body)
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	permit := s.http.Admit(w, r, 1, 0)
	if permit == nil {
		return
	}
	start := time.Now()
	created, held, err := s.cfg.Coordinator.CreateCollectionSlots(r.Context(), name, settings, slots)
	permit.Done(time.Since(start), false)
	if err != nil {
		s.failCatalog(w, r, err)
		return
	}
	coll := coordinator.Collection{Name: name, Settings: settings}
	wire.WriteJSON(w, http.StatusOK, createResponse{collectionSettings: settingsOf(coll), Created: created, Slots: held})
}

// dropCollection is DELETE /v1/collections/{collection}: 200 whether or
// not it existed (deleted says which).
func (s *Server) dropCollection(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "collection")
	if err := catalog.ValidName(name); err != nil {
		s.http.Fail(w, r, wire.Invalid(err.Error()), nil)
		return
	}
	permit := s.http.Admit(w, r, 1, 0)
	if permit == nil {
		return
	}
	start := time.Now()
	dropped, err := s.cfg.Coordinator.DropCollection(r.Context(), name)
	permit.Done(time.Since(start), false)
	if err != nil {
		s.failCatalog(w, r, err)
		return
	}
	wire.WriteJSON(w, http.StatusOK, dropResponse{Name: name, Deleted: dropped})
}

// getCollection is GET /v1/collections/{collection}: settings, state, and
// each shard's documents and bytes.
func (s *Server) getCollection(w http.ResponseWriter, r *http.Request) {
	permit := s.http.Admit(w, r, 1, 0)
	if permit == nil {
		return
	}
	start := time.Now()
	st, err := s.cfg.Coordinator.CollectionStatus(r.Context(), chi.URLParam(r, "collection"))
	permit.Done(time.Since(start), false)
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	counts := st.Slots.Counts(nil)
	out := collectionResponse{collectionSettings: settingsOf(st.Collection), Slots: st.Slots.Slots(), SlotMapEpoch: st.Slots.Epoch, State: stateReady,
		LackingShards: []string{}, DocCount: st.DocCount, Bytes: st.Bytes, Shards: make([]collectionShard, len(st.Shards))}
	if !st.Ready {
		out.State = stateCreating
		out.LackingShards = append(out.LackingShards, st.Lacking...)
	}
	if st.Restoring {
		out.State = stateRestoring
	}
	for i, sh := range st.Shards {
		out.Shards[i] = collectionShard{Name: sh.Shard, Slots: counts[sh.Shard], Answered: sh.Answered, DocCount: sh.DocCount, Bytes: sh.Bytes,
			Index: indexStatusOf(sh.Index)}
		out.Degraded = out.Degraded || !sh.Answered
	}
	wire.WriteJSON(w, http.StatusOK, out)
}

// failCatalog answers a failed create or drop: a catalog conflict (other
// settings, an alias of that name) is 409 conflict; the rest as Fail
// maps them (400, 503 with Retry-After).
func (s *Server) failCatalog(w http.ResponseWriter, r *http.Request, err error) {
	if coordinator.CodeOf(err) == coordinator.CodeConflict {
		err = &wire.Error{Status: http.StatusConflict, Code: wire.CodeCatalogConflict, Msg: err.Error()}
	}
	s.http.Fail(w, r, err, nil)
}

// createJSON is the body of PUT /v1/collections/{collection}; every member
// is optional (null too), and catalog.Defaults fills what is left out.
type createJSON struct {
	Dimension    json.RawMessage `json:"dimension"`
	Metric       json.RawMessage `json:"metric"`
	Quantization json.RawMessage `json:"quantization"`
	Index        json.RawMessage `json:"index"`
	Float32      json.RawMessage `json:"float32"`
	// Slots is how many hash slots the collection is split into (fixed
	// at creation; placement.DefaultSlots when absent).
	Slots json.RawMessage `json:"slots"`
	// SparseVectors are named sparse vectors: {"name": {"modifier":
	// "none"|"idf"}}.
	SparseVectors json.RawMessage `json:"sparse_vectors"`
	// Vectors are named dense vectors, in place of the unnamed one:
	// {"name": {"dimension": N, "metric": ..., "quantization": ...}}.
	Vectors json.RawMessage `json:"vectors"`
}

// decodeCreate decodes and validates a create's body into normalized
// settings and its slot count (0: none named); an empty body asks for the
// defaults. An error names the member.
func decodeCreate(b []byte) (catalog.Settings, int, error) {
	var req createJSON
	if len(bytes.TrimSpace(b)) > 0 {
		if err := wire.DecodeStrict(b, &req); err != nil {
			return catalog.Settings{}, 0, err
		}
	}
	slots := 0
	if wire.IsSet(req.Slots) {
		raw := string(bytes.TrimSpace(req.Slots))
		want := fmt.Sprintf("want an integer %d..%d", placement.MinSlots, placement.MaxSlots)
		if wire.JSONKind(req.Slots) != "a number" {
			return catalog.Settings{}, 0, wire.Invalid(fmt.Sprintf("slots is %s, %s", wire.JSONKind(req.Slots), want))
		}
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n < placement.MinSlots || n > placement.MaxSlots {
			return catalog.Settings{}, 0, wire.Invalid(fmt.Sprintf("slots is %s, %s", clip(raw), want))
		}
		slots = int(n)
	}
	s, err := decodeSettings(req)
	return s, slots, err
}

// decodeSettings validates a create's settings members.
func decodeSettings(req createJSON) (catalog.Settings, error) {
	s, err := decodeMembers(req)
	if err != nil {
		return catalog.Settings{}, err
	}
	s = s.Normalize()
	if err := s.Validate(); err != nil {
		return catalog.Settings{}, wire.Invalid(err.Error())
	}
	return s, nil
}

// decodeMembers reads the settings members a request names, each
// checked; the zero value of a member it leaves out.
func decodeMembers(req createJSON) (catalog.Settings, error) {
	var s catalog.Settings
	if wire.IsSet(req.Dimension) {
		raw := string(bytes.TrimSpace(req.Dimension))
		want := fmt.Sprintf("want an integer %d..%d", catalog.MinDim, catalog.MaxDim)
		if wire.JSONKind(req.Dimension) != "a number" {
			return catalog.Settings{}, wire.Invalid(fmt.Sprintf("dimension is %s, %s", wire.JSONKind(req.Dimension), want))
		}
		d, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || d < catalog.MinDim || d > catalog.MaxDim {
			return catalog.Settings{}, wire.Invalid(fmt.Sprintf("dimension is %s, %s", clip(raw), want))
		}
		s.Dim = int(d)
	}
	metric, err := oneOf("metric", req.Metric, "cosine", "dot", "l2")
	if err != nil {
		return catalog.Settings{}, err
	}
	if metric != "" {
		s.Metric, _ = vector.ParseMetric(metric)
	}
	if s.Quantization, err = oneOf("quantization", req.Quantization, catalog.QuantNone, catalog.QuantInt8); err != nil {
		return catalog.Settings{}, err
	}
	if s.Index, err = oneOf("index", req.Index, catalog.IndexFlat, catalog.IndexIVF); err != nil {
		return catalog.Settings{}, err
	}
	if s.Float32, err = oneOf("float32", req.Float32, catalog.Float32OnDisk, catalog.Float32InMemory); err != nil {
		return catalog.Settings{}, err
	}
	if s.Sparse, err = decodeSparseSettings(req.SparseVectors); err != nil {
		return catalog.Settings{}, err
	}
	if err := checkNamedCreate(req); err != nil {
		return catalog.Settings{}, err
	}
	if s.Named, err = decodeNamedSettings(req.Vectors); err != nil {
		return catalog.Settings{}, err
	}
	return s, nil
}

// oneOf reads an optional string member that must be one of allowed;
// "" when absent or null.
func oneOf(name string, raw json.RawMessage, allowed ...string) (string, error) {
	if !wire.IsSet(raw) {
		return "", nil
	}
	want := "want one of " + strconv.Quote(allowed[0])
	for _, a := range allowed[1:] {
		want += ", " + strconv.Quote(a)
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", wire.Invalid(fmt.Sprintf("%s is %s, %s", name, wire.JSONKind(raw), want))
	}
	for _, a := range allowed {
		if v == a {
			return v, nil
		}
	}
	return "", wire.Invalid(fmt.Sprintf("%s is %q, %s", name, clip(v), want))
}

// clip shortens what a client sent for an error that quotes it.
func clip(s string) string {
	const max = 32
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
