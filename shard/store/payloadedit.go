package store

import (
	"bytes"
	"encoding/json"

	"github.com/trawl-search/trawl/filter"
)

// Payload edits (Edit). Each works on a stored payload's JSON object one
// level at a time, keeping the values it does not touch byte for byte,
// and encodes the result with its keys sorted, so every replica that
// applies the same edit to the same payload stores the same bytes.

// object decodes a stored payload (nil: none) into its members.
func object(b []byte) (map[string]json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(b) == 0 {
		return m, nil
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// encodeObject encodes members (keys sorted; nil for none, as a document
// stored without payload) and checks the limits every payload keeps.
func encodeObject(m map[string]json.RawMessage) ([]byte, error) {
	if len(m) == 0 {
		return nil, nil
	}
	b, err := marshal(m)
	if err != nil {
		return nil, err
	}
	return filter.CheckPayload(b)
}

// marshal encodes an object as the payloads clients sent are stored:
// compact, with <, > and & as they are (encoding/json escapes them by
// default).
func marshal(m map[string]json.RawMessage) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// isObject reports whether a JSON value is an object.
func isObject(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == '{'
}

// setPayload merges set's members into the payload cur, replacing those
// it has, or, with a path, into the object at that dotted path, which is
// made an object where it is missing or holds another value.
func setPayload(cur, set []byte, path []string) ([]byte, error) {
	m, err := object(cur)
	if err != nil {
		return nil, err
	}
	add, err := object(set)
	if err != nil {
		return nil, err
	}
	if err := mergeAt(m, path, add); err != nil {
		return nil, err
	}
	return encodeObject(m)
}

func mergeAt(m map[string]json.RawMessage, path []string, add map[string]json.RawMessage) error {
	if len(path) == 0 {
		for k, v := range add {
			m[k] = v
		}
		return nil
	}
	child := map[string]json.RawMessage{}
	if v, ok := m[path[0]]; ok && isObject(v) {
		var err error
		if child, err = object(v); err != nil {
			return err
		}
	}
	if err := mergeAt(child, path[1:], add); err != nil {
		return err
	}
	b, err := marshal(child)
	if err != nil {
		return err
	}
	m[path[0]] = b
	return nil
}

// deletePayloadKeys removes top-level keys from the payload cur.
func deletePayloadKeys(cur []byte, keys []string) ([]byte, error) {
	m, err := object(cur)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		delete(m, k)
	}
	return encodeObject(m)
}

// overwritePayload is the payload set replaces cur with, in the same
// encoding as the other edits.
func overwritePayload(set []byte) ([]byte, error) {
	m, err := object(set)
	if err != nil {
		return nil, err
	}
	return encodeObject(m)
}
