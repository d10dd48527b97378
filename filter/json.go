package filter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/valyala/fastjson"
)

// Error is a bad filter or payload, and where: Path is a JSON path from the
// root the caller named ("filter.must[1].range", "payload.tags[3]").
type Error struct {
	Path string
	Msg  string
}

func (e *Error) Error() string { return e.Path + ": " + e.Msg }

// path is a JSON path being walked, formatted only for an error.
type path []string

func (p path) key(k string) path { return append(p[:len(p):len(p)], "."+k) }
func (p path) index(i int) path  { return append(p[:len(p):len(p)], "["+strconv.Itoa(i)+"]") }
func (p path) String() string    { return strings.Join(p, "") }
func (p path) errorf(format string, args ...any) *Error {
	return &Error{Path: p.String(), Msg: fmt.Sprintf(format, args...)}
}

// tree decodes one JSON value into maps, slices, strings, bools, nil and
// json.Number (numbers keep their literal, so an integer is told from a
// float as Qdrant tells them). A repeated object key is an error (encoding/json
// would keep the last silently); so is anything after the value. maxDepth
// bounds the nesting of objects and arrays (the root counts as one).
type tree struct {
	dec      *json.Decoder
	root     path
	maxDepth int
	// scalarArrays refuses arrays holding arrays (payloads).
	scalarArrays bool
}

// arrayInArray is a payload's refusal of an array element that is an
// array.
const arrayInArray = "is an array inside an array; array elements must be strings, numbers, booleans, null or objects"

// parsers recycles fastjson parsers: a fresh one allocates its value
// cache on every parse, which cost more than the parse itself. A pool is
// a cache, not state: which parser serves a call changes nothing it
// returns (fromFast copies every string and number out of the parser's
// buffers before it goes back).
var parsers fastjson.ParserPool

func parseTree(b []byte, root path, maxDepth int, scalarArrays bool) (any, error) {
	if !utf8.Valid(b) {
		return nil, root.errorf("is not valid UTF-8")
	}
	// The fast path: fastjson validates the whole document strictly (RFC
	// 8259: escapes, control characters, number grammar, trailing data) and
	// parses it several times faster than encoding/json's token reader,
	// which made payload parsing most of a shard's write cost. Only JSON
	// that breaks takes the token walker below, which names where it breaks.
	// FuzzParseTreeFastPath holds the two paths to the same tree and the same
	// first error.
	if !needsWalker(b) && fastjson.ValidateBytes(b) == nil {
		fp := parsers.Get()
		defer parsers.Put(fp)
		if v, err := fp.ParseBytes(b); err == nil {
			t := &tree{root: root, maxDepth: maxDepth, scalarArrays: scalarArrays}
			return t.fromFast(v, root, 1)
		}
	}
	return walkTree(b, root, maxDepth, scalarArrays)
}

// needsWalker reports inputs the fast path could decode differently from
// encoding/json, which therefore take the walker:
//   - any byte below 0x20: fastjson's validator misses a control
//     character placed before an escape in a string, so only JSON without
//     them (compact JSON, as shards store and forward it) goes fast;
//   - a \u escape that may be a UTF-16 surrogate (\uD800-\uDFFF):
//     fastjson keeps a lone one verbatim where encoding/json decodes it to
//     U+FFFD. A false positive (an escaped backslash before "ud8") only
//     costs speed.
func needsWalker(b []byte) bool {
	for i, c := range b {
		switch {
		case c < 0x20:
			return true
		case c == '\\' && i+3 < len(b) && b[i+1] == 'u':
			if d, e := b[i+2]|0x20, b[i+3]|0x20; d == 'd' && (e >= '8' && e <= '9' || e >= 'a' && e <= 'f') {
				return true
			}
		}
	}
	return false
}

// walkTree is parseTree's slow path, encoding/json's token reader walked
// value by value, so a syntax error is reported at the path it is in.
func walkTree(b []byte, root path, maxDepth int, scalarArrays bool) (any, error) {
	t := &tree{dec: json.NewDecoder(bytes.NewReader(b)), root: root, maxDepth: maxDepth, scalarArrays: scalarArrays}
	t.dec.UseNumber()
	v, err := t.value(root, 1)
	if err != nil {
		return nil, err
	}
	if _, err := t.dec.Token(); !errors.Is(err, io.EOF) {
		return nil, root.errorf("has data after its JSON value")
	}
	return v, nil
}

// fromFast converts fastjson's parse into the tree value would have
// decoded, applying the same checks in the same document order (depth on
// entering an object or array, a repeated key before its value, array
// elements as they come), so the first error is the one value reports.
func (t *tree) fromFast(v *fastjson.Value, p path, depth int) (any, error) {
	switch v.Type() {
	case fastjson.TypeNull:
		return nil, nil
	case fastjson.TypeTrue:
		return true, nil
	case fastjson.TypeFalse:
		return false, nil
	case fastjson.TypeString:
		return string(v.GetStringBytes()), nil
	case fastjson.TypeNumber:
		// The literal as written: it was validated against JSON's number
		// grammar, and number() classifies it as the token walker's does.
		return json.Number(v.MarshalTo(nil)), nil
	case fastjson.TypeObject:
		if depth > t.maxDepth {
			return nil, p.errorf("is nested deeper than %d levels", t.maxDepth)
		}
		o, _ := v.Object()
		m := make(map[string]any, o.Len())
		var err error
		o.Visit(func(kb []byte, x *fastjson.Value) {
			if err != nil {
				return
			}
			k := string(kb)
			kp := p.key(k)
			if _, dup := m[k]; dup {
				err = kp.errorf("repeats a key")
				return
			}
			m[k], err = t.fromFast(x, kp, depth+1)
		})
		if err != nil {
			return nil, err
		}
		return m, nil
	case fastjson.TypeArray:
		if depth > t.maxDepth {
			return nil, p.errorf("is nested deeper than %d levels", t.maxDepth)
		}
		xs, _ := v.Array()
		a := make([]any, 0, len(xs))
		for i, x := range xs {
			ip := p.index(i)
			e, err := t.fromFast(x, ip, depth+1)
			if err != nil {
				return nil, err
			}
			if t.scalarArrays {
				if _, ok := e.([]any); ok {
					return nil, ip.errorf(arrayInArray)
				}
			}
			a = append(a, e)
		}
		return a, nil
	}
	return nil, p.errorf("bad JSON: unexpected value")
}

func (t *tree) syntax(p path, err error) *Error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return p.errorf("bad JSON: %v", err)
}

func (t *tree) value(p path, depth int) (any, error) {
	tok, err := t.dec.Token()
	if err != nil {
		return nil, t.syntax(p, err)
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	if depth > t.maxDepth {
		return nil, p.errorf("is nested deeper than %d levels", t.maxDepth)
	}
	switch d {
	case '{':
		m := map[string]any{}
		for t.dec.More() {
			kt, err := t.dec.Token()
			if err != nil {
				return nil, t.syntax(p, err)
			}
			k, _ := kt.(string)
			kp := p.key(k)
			if _, dup := m[k]; dup {
				return nil, kp.errorf("repeats a key")
			}
			v, err := t.value(kp, depth+1)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		if _, err := t.dec.Token(); err != nil {
			return nil, t.syntax(p, err)
		}
		return m, nil
	case '[':
		a := []any{}
		for i := 0; t.dec.More(); i++ {
			ip := p.index(i)
			v, err := t.value(ip, depth+1)
			if err != nil {
				return nil, err
			}
			if t.scalarArrays {
				if _, ok := v.([]any); ok {
					return nil, ip.errorf(arrayInArray)
				}
			}
			a = append(a, v)
		}
		if _, err := t.dec.Token(); err != nil {
			return nil, t.syntax(p, err)
		}
		return a, nil
	}
	return nil, p.errorf("bad JSON: unexpected %q", d)
}

// number classifies a JSON number literal: an integer literal that fits
// int64 is an int64 (Qdrant's integer), anything else a finite float64.
func number(n json.Number) (any, error) {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("number %s is beyond the float64 range", s)
	}
	return f, nil
}
