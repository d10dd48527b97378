package qdrantx

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Limits of the Qdrant API beyond /v1's.
const (
	// MaxUpsert is the most points one upsert (or delete by ids) may
	// carry (over REST the body limit usually binds first: about 600
	// 1536-D points as JSON).
	MaxUpsert = 10000
	// DefaultLimit is Qdrant's default limit for query and scroll.
	DefaultLimit = 10
)

// Refusals several calls give, worded once.
const (
	ErrNamedVectors = "the collection has no named vectors: it holds one unnamed vector per point"
	ErrShardKey     = "shard_key is not supported: trawl places points by a hash of their id over every shard"
	ErrSparse       = "sparse vectors are not supported: trawl stores one dense vector per point"
	ErrMulti        = "multivectors are not supported: trawl stores one vector per point"
	ErrLookupFrom   = "lookup_from is not supported: a query by id looks the point up in the collection it searches"
	// ErrOrderByDatetime: trawl's payloads hold datetimes as strings,
	// which order_by does not read.
	ErrOrderByDatetime = "trawl orders by numbers only, not datetimes"
	ErrEmptyDelete     = "filter has no conditions, which would delete every point; trawl refuses that (delete by ids, or give the filter a condition)"
	ErrEmptyEdit       = "filter has no conditions, which would edit every point; trawl refuses that (edit by ids, or give the filter a condition)"
	// ErrDeleteVectors refuses delete_vectors of the unnamed vector.
	ErrDeleteVectors = "deleting vectors is not supported: a trawl point has exactly one unnamed vector, which it cannot be without (delete the point instead)"
	// ErrOverwriteKey refuses overwrite_payload's key.
	ErrOverwriteKey = "key is not supported on an overwrite: trawl overwrites the whole payload (use set_payload with key to set under a path)"
)

// StripKeys drops the excluded top-level keys from a payload (Qdrant's
// with_payload exclude).
func StripKeys(p []byte, exclude []string) (json.RawMessage, error) {
	if len(exclude) == 0 || len(p) == 0 {
		return p, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(p, &obj); err != nil {
		return nil, fmt.Errorf("stored payload does not decode: %w", err)
	}
	for _, k := range exclude {
		delete(obj, k)
	}
	return json.Marshal(obj)
}

// Prefix is how Qdrant's messages name an error's kind ("Bad request:
// ..."), by the HTTP status of the error; both transports lead their
// messages with it.
func Prefix(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "Bad request: "
	case http.StatusUnauthorized:
		return "Unauthorized: "
	case http.StatusForbidden:
		return "Forbidden: "
	case http.StatusNotFound:
		return "Not found: "
	case http.StatusConflict:
		return "Wrong input: "
	case http.StatusServiceUnavailable:
		return "Service unavailable: "
	case http.StatusRequestEntityTooLarge:
		return "Payload too large: "
	case http.StatusRequestTimeout:
		return "Timeout: "
	case http.StatusTooManyRequests:
		return "Too many requests: "
	}
	return ""
}
