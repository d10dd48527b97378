package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

// WriteJSON encodes v with status. Encoding errors can only be a client
// gone away, which nothing can answer.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// DecodeStrict decodes exactly one JSON value into v: unknown fields and
// trailing data are errors.
func DecodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return Invalid("request body is empty, want a JSON object")
		}
		return Invalid("bad JSON: " + err.Error())
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Invalid("bad JSON: trailing data after the request object")
	}
	return nil
}

// IsSet reports whether an optional JSON member was given and not null.
func IsSet(raw json.RawMessage) bool {
	return len(raw) > 0 && !bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// JSONKind names the JSON type of a raw value for an error.
func JSONKind(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "empty"
	}
	switch t[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}
