package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"unicode/utf8"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/vector"
)

// decodeWrite decodes and validates a /v1/vectors body, all or nothing.
//
// A body in the shape `router load` and the clients send
// ({"vectors": [{"id", "vector_b64", "payload"}, ...]}) is read in one
// pass by writeScanner; encoding/json reads such a body four times over
// (the outer object and then each entry, each scanned for its extent and
// again to decode it) and copies every base64 string twice, which made it
// most of a loading router's CPU. Anything else, and any body with a
// mistake, goes through decodeWriteJSON, so every error and every other
// shape is answered as encoding/json answers it.
func decodeWrite(b []byte, s schema) ([]record, error) {
	if recs, ok := decodeWriteFast(b, s); ok {
		return recs, nil
	}
	return decodeWriteJSON(b, s)
}

// decodeWriteFast decodes b if it is a valid write in the common shape and
// reports whether it did; the records are then exactly what
// decodeWriteJSON returns for b. It never reports an error: a body it
// does not take is left to decodeWriteJSON.
func decodeWriteFast(b []byte, s schema) ([]record, bool) {
	sc := writeScanner{b: b}
	if !sc.byte('{') || !sc.key("vectors") || !sc.byte('[') {
		return nil, false
	}
	out := make([]record, 0, 16)
	seen := make(map[string]struct{}, 16)
	var raw []byte // scratch for the decoded base64
	for {
		if len(out) == MaxWriteBatch {
			return nil, false
		}
		rec, ok := sc.entry(s, &raw)
		if !ok {
			return nil, false
		}
		if _, dup := seen[rec.ID]; dup {
			return nil, false
		}
		seen[rec.ID] = struct{}{}
		out = append(out, rec)
		if sc.byte(',') {
			continue
		}
		if !sc.byte(']') {
			return nil, false
		}
		break
	}
	if !sc.byte('}') {
		return nil, false
	}
	sc.space()
	return out, sc.i == len(b)
}

// writeScanner reads the common shape of a write body. Every method that
// reports false leaves the body to encoding/json; none of them decides
// that a body is invalid.
type writeScanner struct {
	b []byte
	i int
}

// space skips JSON whitespace.
func (sc *writeScanner) space() {
	for sc.i < len(sc.b) {
		switch sc.b[sc.i] {
		case ' ', '\t', '\n', '\r':
			sc.i++
		default:
			return
		}
	}
}

// byte skips whitespace and then c, if c is next.
func (sc *writeScanner) byte(c byte) bool {
	sc.space()
	if sc.i < len(sc.b) && sc.b[sc.i] == c {
		sc.i++
		return true
	}
	return false
}

// plainString reads a JSON string without escapes or control characters,
// of valid UTF-8: its bytes are then its value, as encoding/json decodes
// it.
func (sc *writeScanner) plainString() ([]byte, bool) {
	if !sc.byte('"') {
		return nil, false
	}
	n := bytes.IndexByte(sc.b[sc.i:], '"')
	if n < 0 {
		return nil, false
	}
	v := sc.b[sc.i : sc.i+n]
	for _, c := range v {
		if c < 0x20 || c == '\\' {
			return nil, false
		}
	}
	if !utf8.Valid(v) {
		return nil, false
	}
	sc.i += n + 1
	return v, true
}

// key reads a member's name, which must be name exactly (encoding/json
// also matches other cases), and its colon.
func (sc *writeScanner) key(name string) bool {
	k, ok := sc.plainString()
	return ok && string(k) == name && sc.byte(':')
}

// entry reads one {"id", "vector_b64", "payload"} object, each member at
// most once and in any order, "id" and "vector_b64" given, and checks it
// as decodeWriteJSON does. raw is scratch for the decoded base64.
func (sc *writeScanner) entry(s schema, raw *[]byte) (record, bool) {
	var (
		rec             record
		haveID, haveVec bool
		havePayload     bool
	)
	if !sc.byte('{') {
		return record{}, false
	}
	for {
		k, ok := sc.plainString()
		if !ok || !sc.byte(':') {
			return record{}, false
		}
		switch string(k) {
		case "id":
			id, ok := sc.plainString()
			if haveID || !ok || wire.CheckID(string(id)) != nil {
				return record{}, false
			}
			rec.ID, haveID = string(id), true
		case "vector_b64":
			if haveVec {
				return record{}, false
			}
			v, ok := sc.vectorB64(s, raw)
			if !ok {
				return record{}, false
			}
			rec.Vector, haveVec = v, true
		case "payload":
			if havePayload {
				return record{}, false
			}
			p, ok := sc.payload()
			if !ok {
				return record{}, false
			}
			rec.Payload, havePayload = p, true
		default:
			return record{}, false
		}
		if sc.byte(',') {
			continue
		}
		if !sc.byte('}') || !haveID || !haveVec {
			return record{}, false
		}
		return rec, true
	}
}

// vectorB64 reads "vector_b64"'s string: padded standard base64 of
// little-endian float32 that passes wire.CheckVector.
func (sc *writeScanner) vectorB64(s schema, raw *[]byte) ([]float32, bool) {
	if !sc.byte('"') {
		return nil, false
	}
	n := bytes.IndexByte(sc.b[sc.i:], '"')
	if n < 0 {
		return nil, false
	}
	enc := sc.b[sc.i : sc.i+n]
	sc.i += n + 1
	if cap(*raw) < base64.StdEncoding.DecodedLen(len(enc)) {
		*raw = make([]byte, base64.StdEncoding.DecodedLen(len(enc)))
	}
	m, err := base64.StdEncoding.Decode((*raw)[:cap(*raw)], enc)
	// The decoder skips '\r' and '\n', which a JSON string may not hold
	// raw: a string of exactly the encoded length of what it decoded to
	// has none. A backslash (an escape) is not base64 and fails.
	if err != nil || len(enc) != base64.StdEncoding.EncodedLen(m) {
		return nil, false
	}
	v, err := vector.DecodeLE((*raw)[:m])
	if err != nil || wire.CheckVector(s, v) != nil {
		return nil, false
	}
	return v, true
}

// payload reads "payload"'s value: null (no payload) or an object that
// wire.CheckPayload accepts, returning what it returns.
func (sc *writeScanner) payload() ([]byte, bool) {
	sc.space()
	if bytes.HasPrefix(sc.b[sc.i:], []byte("null")) {
		sc.i += len("null")
		return nil, true
	}
	if sc.i >= len(sc.b) || sc.b[sc.i] != '{' {
		return nil, false
	}
	end, ok := objectEnd(sc.b, sc.i)
	if !ok {
		return nil, false
	}
	v := sc.b[sc.i:end]
	if !json.Valid(v) {
		return nil, false
	}
	p, err := wire.CheckPayload(v)
	if err != nil {
		return nil, false
	}
	sc.i = end
	return p, true
}

// objectEnd is the index just past the object that opens at b[start],
// found by its brackets outside strings; whether it is valid JSON is
// for the caller to check.
func objectEnd(b []byte, start int) (int, bool) {
	depth := 0
	for i := start; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1, true
			}
		}
	}
	return 0, false
}
