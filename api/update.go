package api

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/catalog"
)

// updateResponse is PATCH /v1/collections/{collection}'s answer: the
// settings as they are now, and whether this request changed them.
type updateResponse struct {
	collectionSettings
	Updated bool `json:"updated"`
}

// updateCollection is PATCH /v1/collections/{collection}: the members of
// a create's body it names change the collection's settings online where
// they can (quantization of a flat collection: "none" or "int8", on every
// replica at one catalog entry); a member that restates the setting held
// changes nothing, and one that would change a setting that cannot change
// (dimension, metric, index, float32, slots) is a 400 naming it.
func (s *Server) updateCollection(w http.ResponseWriter, r *http.Request) {
	var req createJSON
	name, ok := s.collectionBody(w, r, &req)
	if !ok {
		return
	}
	if wire.IsSet(req.Slots) {
		s.http.Fail(w, r, wire.Invalid("slots cannot change online: a collection's hash slots are fixed when it is created"), nil)
		return
	}
	asked, err := decodeMembers(req)
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return
	}
	permit := s.http.Admit(w, r, 1, 0)
	if permit == nil {
		return
	}
	start := time.Now()
	coll, err := s.cfg.Coordinator.Collection(r.Context(), name)
	next := coll.Settings
	if asked.Dim != 0 {
		next.Dim = asked.Dim
	}
	if wire.IsSet(req.Metric) {
		next.Metric = asked.Metric
	}
	for _, f := range []struct {
		to *string
		v  string
	}{
		{&next.Quantization, asked.Quantization}, {&next.Index, asked.Index}, {&next.Float32, asked.Float32},
	} {
		if f.v != "" {
			*f.to = f.v
		}
	}
	var changed bool
	if err == nil {
		changed, err = s.cfg.Coordinator.UpdateCollection(r.Context(), coll, next)
	}
	permit.Done(time.Since(start), false)
	if err != nil {
		s.failCatalog(w, r, err)
		return
	}
	coll.Settings = next.Normalize()
	wire.WriteJSON(w, http.StatusOK, updateResponse{collectionSettings: settingsOf(coll), Updated: changed})
}

// collectionBody reads what a write to /v1/collections/{collection} names:
// the collection (a valid name) and its body decoded strictly into req.
// On bad input it answers the 400 (or 413, 408) itself and reports false.
func (s *Server) collectionBody(w http.ResponseWriter, r *http.Request, req any) (string, bool) {
	name := chi.URLParam(r, "collection")
	if err := catalog.ValidName(name); err != nil {
		s.http.Fail(w, r, wire.Invalid(err.Error()), nil)
		return "", false
	}
	body, err := s.http.ReadBody(w, r)
	if err != nil {
		s.http.Fail(w, r, err, nil)
		return "", false
	}
	if err := wire.DecodeStrict(body, req); err != nil {
		s.http.Fail(w, r, err, nil)
		return "", false
	}
	return name, true
}
