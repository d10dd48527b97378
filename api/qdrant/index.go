package qdrant

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"

	"github.com/trawl-search/trawl/api/internal/wire"
)

// Payload indexes (Qdrant's PUT /collections/{c}/index and DELETE
// /collections/{c}/index/{field}). The shards index every payload key
// whatever is declared, so a declaration is recorded (GET
// /collections/{c} shows it in payload_schema) and changes no answer.

// payloadTypes are the payload schema types a declaration may name: those
// whose Qdrant index matches exactly as trawl's filters do, or serves only
// conditions trawl refuses anyway (datetime ranges, full-text, geo).
var payloadTypes = map[string]bool{
	"keyword": true, "integer": true, "float": true, "bool": true, "datetime": true, "text": true, "geo": true,
}

// errUUIDIndex: Qdrant's uuid index parses the strings it compares, so
// it matches differently written UUIDs ("8A1E…" and "8a1e…") that trawl's
// exact string match keeps apart.
const errUUIDIndex = `field_schema uuid is not supported: a uuid index matches UUIDs written differently (case, braces) as equal, trawl matches strings exactly; declare "keyword"`

// decodeFieldIndex reads a CreateFieldIndex: field_name, and field_schema
// (or its older name field_type) as a type name or an object of a type
// and its params (the params tune Qdrant's index structures and are
// accepted).
func decodeFieldIndex(b []byte) (field, schema string, err error) {
	var req struct {
		FieldName   *string         `json:"field_name"`
		FieldSchema json.RawMessage `json:"field_schema"`
		FieldType   json.RawMessage `json:"field_type"`
	}
	if err := wire.DecodeStrict(b, &req); err != nil {
		return "", "", err
	}
	if req.FieldName == nil || *req.FieldName == "" {
		return "", "", wire.Invalid("field_name is missing")
	}
	if _, err := hasValue(*req.FieldName); err != nil {
		return "", "", wire.Invalid(fmt.Sprintf("field_name %q is not a payload key: a key is a dotted path like meta.draft", *req.FieldName))
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
	if err := json.Unmarshal(raw, &schema); err != nil {
		var params struct {
			Type *string `json:"type"`
		}
		if err := json.Unmarshal(raw, &params); err != nil || params.Type == nil {
			return "", "", wire.Invalid(`field_schema is ` + wire.JSONKind(raw) + `, want a type ("keyword", "integer", ...) or {"type": ..., params}`)
		}
		schema = *params.Type
	}
	if schema == "uuid" {
		return "", "", wire.Invalid(errUUIDIndex)
	}
	if !payloadTypes[schema] {
		return "", "", wire.Invalid(fmt.Sprintf("field_schema %q is not a payload schema type: want keyword, integer, float, bool, datetime, text or geo", schema))
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
