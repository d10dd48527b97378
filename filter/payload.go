package filter

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Payload limits (DESIGN.md): the encoded (compacted) object and how deep
// objects and arrays nest, the payload object itself counting as one.
const (
	MaxPayloadBytes = 64 << 10
	MaxDepth        = 8
)

// CheckPayload validates a document's payload, b being its JSON: an object
// whose values are strings, numbers (finite float64), booleans, null,
// objects of the same, or arrays of any of those but arrays (an array of
// objects is what a nested condition reads), nested at most MaxDepth deep,
// with no key repeated, at most MaxPayloadBytes once compacted. It returns
// the compacted JSON, which is what a shard stores. Errors are *Error with
// paths from "payload".
func CheckPayload(b []byte) ([]byte, error) {
	root := path{"payload"}
	v, err := parseTree(b, root, MaxDepth, true)
	if err != nil {
		return nil, err
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, root.errorf("is %s, want a JSON object", kindOf(v))
	}
	if err := checkNumbers(root, v); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, root.errorf("bad JSON: %v", err)
	}
	if out.Len() > MaxPayloadBytes {
		return nil, root.errorf("is %d bytes encoded, over the %d-byte limit", out.Len(), MaxPayloadBytes)
	}
	return out.Bytes(), nil
}

func checkNumbers(p path, v any) error {
	switch v := v.(type) {
	case json.Number:
		if _, err := number(v); err != nil {
			return p.errorf("%v", err)
		}
	case map[string]any:
		for k, x := range v {
			if err := checkNumbers(p.key(k), x); err != nil {
				return err
			}
		}
	case []any:
		for i, x := range v {
			if err := checkNumbers(p.index(i), x); err != nil {
				return err
			}
		}
	}
	return nil
}

// DecodePayload decodes a stored payload (as CheckPayload returned it) into
// the tree Match evaluates: map[string]any objects, []any arrays, string,
// bool, nil, int64 for integer literals and float64 for other numbers.
// Empty bytes are a document without payload: a nil map.
func DecodePayload(b []byte) (map[string]any, error) {
	if len(b) == 0 {
		return nil, nil
	}
	v, err := parseTree(b, path{"payload"}, MaxDepth, true)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("payload is %s, want a JSON object", kindOf(v))
	}
	if err := convertNumbers(m); err != nil {
		return nil, err
	}
	return m, nil
}

func convertNumbers(v any) error {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if n, ok := x.(json.Number); ok {
				c, err := number(n)
				if err != nil {
					return err
				}
				v[k] = c
				continue
			}
			if err := convertNumbers(x); err != nil {
				return err
			}
		}
	case []any:
		for i, x := range v {
			if n, ok := x.(json.Number); ok {
				c, err := number(n)
				if err != nil {
					return err
				}
				v[i] = c
				continue
			}
			if err := convertNumbers(x); err != nil {
				return err
			}
		}
	}
	return nil
}

// kindOf names a tree value's JSON type for an error.
func kindOf(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		if _, err := number(v); err == nil {
			if _, isInt := mustNumber(v).(int64); isInt {
				return "an integer"
			}
		}
		return "a number"
	case int64:
		return "an integer"
	case float64:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func mustNumber(n json.Number) any {
	v, _ := number(n)
	return v
}
