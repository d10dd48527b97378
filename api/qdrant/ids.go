package qdrant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
	"github.com/trawl-search/trawl/idorder"
)

// Qdrant point ids and trawl ids: see qdrantx (ids.go). Over REST an
// integer id is a JSON number and a UUID a JSON string, both ways.

// parseID maps one id as a Qdrant request carries it (a JSON number
// or string) to its trawl id.
func parseID(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", fmt.Errorf("id is missing")
	}
	switch c := raw[0]; {
	case string(raw) == "null":
		return "", fmt.Errorf("id is null, want an unsigned integer or a UUID string")
	case c == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("id is not a valid JSON string")
		}
		return qdrantx.StringID(s)
	case c == '-' || (c >= '0' && c <= '9'):
		return qdrantx.ParseUint(string(raw))
	}
	return "", fmt.Errorf("id is %s, want an unsigned integer or a UUID string", wire.JSONKind(raw))
}

// parsePathID maps the {id} of /collections/{name}/points/{id}: digits
// are an integer id, anything else must be a UUID.
func parsePathID(s string) (string, error) {
	if s != "" && strings.Trim(s, "0123456789") == "" {
		return qdrantx.ParseUint(s)
	}
	return qdrantx.StringID(s)
}

// pointID is a trawl id as a Qdrant answer carries it.
type pointID string

// MarshalJSON writes a canonical unsigned integer as a number, anything
// else as a string.
func (id pointID) MarshalJSON() ([]byte, error) {
	if _, ok := idorder.Uint(string(id)); ok {
		return []byte(id), nil
	}
	return json.Marshal(string(id))
}
