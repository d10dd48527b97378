package qdrant

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/trawl-search/trawl/api/internal/wire"
)

// jsonVector is a JSON value that is usually an array of numbers (a
// vector). Such an array is parsed straight into floats, in one pass and
// without reflection: the 1536 numbers of a query are most of a request's
// decoding, and keeping them raw to decode later (the value may also be a
// named or sparse vector, or a point id) would parse them twice. Anything
// else is kept raw, for decodeVector to name what it is.
type jsonVector struct {
	floats   []float64
	isFloats bool
	raw      json.RawMessage
}

// UnmarshalJSON implements json.Unmarshaler.
func (v *jsonVector) UnmarshalJSON(b []byte) error {
	if fs, ok := parseNumberArray(b); ok {
		*v = jsonVector{floats: fs, isFloats: true}
		return nil
	}
	// b is the decoder's buffer: keep a copy.
	*v = jsonVector{raw: slices.Clone(b)}
	return nil
}

// set reports whether the member was given and not null.
func (v jsonVector) set() bool { return v.isFloats || wire.IsSet(v.raw) }

// parseNumberArray parses b when it is a JSON array of numbers (already
// known to be valid JSON: the decoder checked it), and reports whether it
// was one.
func parseNumberArray(b []byte) ([]float64, bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, false
	}
	i = skipSpace(b, i+1)
	out := make([]float64, 0, 1536)
	if i < len(b) && b[i] == ']' {
		return out, skipSpace(b, i+1) == len(b)
	}
	for {
		j := i
		for j < len(b) && isNumberByte(b[j]) {
			j++
		}
		if j == i || (b[i] != '-' && (b[i] < '0' || b[i] > '9')) {
			return nil, false // not a number: an array of arrays, strings, ...
		}
		// The decoder validated b as JSON, so these bytes are a JSON
		// number, which ParseFloat reads exactly as encoding/json does.
		f, err := strconv.ParseFloat(string(b[i:j]), 64)
		if err != nil {
			return nil, false // out of float64 range: let the slow path say so
		}
		out = append(out, f)
		i = skipSpace(b, j)
		if i >= len(b) {
			return nil, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return out, skipSpace(b, i+1) == len(b)
		default:
			return nil, false
		}
	}
}

func isNumberByte(c byte) bool {
	return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
