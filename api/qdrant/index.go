package qdrant

import (
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
	"github.com/trawl-search/trawl/filter"
)

// Payload indexes (Qdrant's PUT /collections/{c}/index and DELETE
// /collections/{c}/index/{field}). The shards index every payload key
// whatever is declared, so a declaration is recorded (GET
// /collections/{c} shows it in payload_schema) and changes no answer,
// but for uuid and text (qdrantx.CheckFieldSchema).

// decodeFieldIndex reads a CreateFieldIndex: field_name, and field_schema
// (or its older name field_type) as a type name or an object of a type
// and its params (the params tune Qdrant's index structures and are
// accepted, but a text index's, which say how match.text tokenizes).
func decodeFieldIndex(b []byte) (field, schema string, err error) {
	var req struct {
		FieldName   *string         `json:"field_name"`
		FieldSchema json.RawMessage `json:"field_schema"`
		FieldType   json.RawMessage `json:"field_type"`
	}
	if err := wire.DecodeStrict(b, &req); err != nil {
		return "", "", err
	}
	if req.FieldName == nil {
		return "", "", wire.Invalid("field_name is missing")
	}
	if err := qdrantx.CheckField(*req.FieldName); err != nil {
		return "", "", err
	}
	raw := req.FieldSchema
	if wire.IsSet(req.FieldType) {
		if wire.IsSet(raw) {
			return "", "", wire.Invalid("give field_schema or field_type (its older name), not both")
		}
		raw = req.FieldType
	}
	if !wire.IsSet(raw) {
		return "", "", wire.Invalid("Can't auto-detect field type, please specify `field_schema` in the request")
	}
	var params []byte // a type's params, when given as an object
	if err := json.Unmarshal(raw, &schema); err != nil {
		var p struct {
			Type *string `json:"type"`
		}
		if err := json.Unmarshal(raw, &p); err != nil || p.Type == nil {
			return "", "", wire.Invalid(`field_schema is ` + wire.JSONKind(raw) + `, want a type ("keyword", "integer", ...) or {"type": ..., params}`)
		}
		schema, params = *p.Type, raw
	}
	if err := qdrantx.CheckFieldSchema(schema); err != nil {
		return "", "", err
	}
	if schema == filter.SchemaText {
		// The text index's params change answers (how match.text
		// tokenizes), so they are checked and recorded.
		if schema, err = qdrantx.TextSchema(params); err != nil {
			return "", "", err
		}
	}
	return *req.FieldName, schema, nil
}

// createIndex is PUT /collections/{c}/index.
func (h *Handler) createIndex(w http.ResponseWriter, r *http.Request) {
	type fieldIndex struct{ field, schema string }
	fi, _, ok := decodeRequest(h, w, r, func(b []byte) (fieldIndex, error) {
		f, s, err := decodeFieldIndex(b)
		return fieldIndex{f, s}, err
	})
	if !ok {
		return
	}
	if err := h.cfg.Coordinator.SetPayloadIndex(r.Context(), coll(r), fi.field, fi.schema); err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	answer(w, r, updateResult{Status: "completed"}, nil)
}

// deleteIndex is DELETE /collections/{c}/index/{field}: removing a
// declaration never made succeeds too, as in Qdrant.
func (h *Handler) deleteIndex(w http.ResponseWriter, r *http.Request) {
	if _, err := h.routeParams(r); err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	field := chi.URLParam(r, "field")
	if r.URL.RawPath != "" {
		if u, err := url.PathUnescape(field); err == nil {
			field = u
		}
	}
	if err := h.cfg.Coordinator.DropPayloadIndex(r.Context(), coll(r), field); err != nil {
		h.http.Fail(w, r, err, nil)
		return
	}
	answer(w, r, updateResult{Status: "completed"}, nil)
}
