package filter

import (
	"encoding/hex"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxJSONDepth bounds the JSON nesting Parse reads before checking the
// filter's own nesting: a filter of MaxNesting levels is at most about
// five JSON levels each (condition, nested, filter, min_should, list), and
// a geo polygon six more (geo_polygon, interiors, ring, points, point).
const maxJSONDepth = 6*MaxNesting + 8

// Parse decodes a filter in Qdrant's JSON and checks all of it: clauses
// must, should and must_not, each a list of conditions or one condition;
// conditions {"key", "match": {"value"|"any"|"except"}}, {"key", "range"},
// {"is_empty": {"key"}}, {"is_null": {"key"}} or a nested filter; at most
// MaxNesting levels and MaxConditions conditions. A JSON null clause or
// range bound is absent, as Qdrant reads it. Errors are *Error, their
// paths starting at "filter".
func Parse(b []byte) (*Filter, error) {
	root := path{"filter"}
	v, err := parseTree(b, root, maxJSONDepth, false)
	if err != nil {
		if e, ok := err.(*Error); ok && e.Msg == "is nested deeper than "+strconv.Itoa(maxJSONDepth)+" levels" {
			e.Path, e.Msg = "filter", "is nested deeper than "+strconv.Itoa(MaxNesting)+" filters"
		}
		return nil, err
	}
	d := &decoder{}
	f, err := d.filter(root, v, 1)
	if err != nil {
		return nil, err
	}
	if d.conds > MaxConditions {
		return nil, root.errorf("has %d conditions, over the limit of %d", d.conds, MaxConditions)
	}
	return f, nil
}

type decoder struct {
	conds int
}

// sortedKeys gives an object's keys in order, so the first problem
// reported does not depend on map order.
func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

var clauses = []string{"must", "should", "must_not"}

// filterMembers are the members of a filter object: its clauses and
// min_should.
var filterMembers = []string{"must", "should", "must_not", "min_should"}

func (d *decoder) filter(p path, v any, level int) (*Filter, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, p.errorf("is %s, want a filter object", kindOf(v))
	}
	if level > MaxNesting {
		return nil, p.errorf("is nested deeper than %d filters", MaxNesting)
	}
	for _, k := range sortedKeys(m) {
		if !slices.Contains(filterMembers, k) {
			return nil, p.key(k).errorf("unknown clause; a filter has must, should, must_not and min_should")
		}
	}
	f := &Filter{}
	if raw := m["min_should"]; raw != nil {
		ms, err := d.minShould(p.key("min_should"), raw, level)
		if err != nil {
			return nil, err
		}
		f.MinShould = ms
	}
	for _, name := range clauses {
		raw, ok := m[name]
		if !ok || raw == nil {
			continue
		}
		cp := p.key(name)
		var conds []Condition
		switch x := raw.(type) {
		case []any:
			conds = make([]Condition, len(x))
			for i, e := range x {
				c, err := d.condition(cp.index(i), e, level)
				if err != nil {
					return nil, err
				}
				conds[i] = c
			}
		case map[string]any:
			c, err := d.condition(cp, x, level)
			if err != nil {
				return nil, err
			}
			conds = []Condition{c}
		default:
			return nil, cp.errorf("is %s, want a condition or a list of conditions", kindOf(raw))
		}
		if len(conds) == 0 {
			conds = nil // an empty list constrains nothing, as an absent one
		}
		switch name {
		case "must":
			f.Must = conds
		case "should":
			f.Should = conds
		default:
			f.MustNot = conds
		}
	}
	return f, nil
}

// minShould reads {"conditions": [...], "min_count": n}, n at least 1
// (Qdrant refuses 0, which would match everything).
func (d *decoder) minShould(p path, v any, level int) (*MinShould, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, p.errorf(`is %s, want {"conditions": [...], "min_count": n}`, kindOf(v))
	}
	for _, k := range sortedKeys(m) {
		if k != "conditions" && k != "min_count" {
			return nil, p.key(k).errorf("unknown field; min_should takes conditions and min_count")
		}
	}
	cp := p.key("conditions")
	list, ok := m["conditions"].([]any)
	if !ok {
		if _, present := m["conditions"]; !present {
			return nil, cp.errorf("is missing")
		}
		return nil, cp.errorf("is %s, want a list of conditions", kindOf(m["conditions"]))
	}
	ms := &MinShould{Conds: make([]Condition, len(list))}
	for i, e := range list {
		c, err := d.condition(cp.index(i), e, level)
		if err != nil {
			return nil, err
		}
		ms.Conds[i] = c
	}
	if len(ms.Conds) == 0 {
		ms.Conds = nil
	}
	np := p.key("min_count")
	raw, present := m["min_count"]
	if !present {
		return nil, np.errorf("is missing")
	}
	n, ok := raw.(json.Number)
	var i int64
	if ok {
		x, err := number(n)
		i, ok = x.(int64)
		ok = ok && err == nil
	}
	if !ok || i < 1 {
		return nil, np.errorf("is %s, want a whole number of conditions, 1 or more", describe(raw))
	}
	ms.Count = int(min(i, MaxConditions+1))
	return ms, nil
}

// describe is a value for an error: a number as written, else its kind.
func describe(v any) string {
	if n, ok := v.(json.Number); ok {
		return string(n)
	}
	return kindOf(v)
}

// unsupported names Qdrant conditions and operators outside trawl's subset,
// so the error says so rather than "unknown".
var unsupported = map[string]bool{"has_vector": true, "prefix": true}

func (d *decoder) condition(p path, v any, level int) (Condition, error) {
	d.conds++
	if d.conds > MaxConditions {
		return Condition{}, path{"filter"}.errorf("has more than %d conditions", MaxConditions)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return Condition{}, p.errorf("is %s, want a condition object", kindOf(v))
	}
	for _, k := range sortedKeys(m) {
		if unsupported[k] {
			return Condition{}, p.key(k).errorf("is not supported; conditions are key with match, range, values_count or a geo area, is_empty, is_null, has_id, nested, or a nested filter")
		}
	}
	_, keyed := m["key"]
	_, empty := m["is_empty"]
	_, null := m["is_null"]
	_, hasID := m["has_id"]
	_, nested := m["nested"]
	switch {
	case keyed:
		return d.keyed(p, m)
	case hasID || nested:
		name := "has_id"
		if nested {
			name = "nested"
		}
		for _, k := range sortedKeys(m) {
			if k != name {
				return Condition{}, p.key(k).errorf("unexpected beside %s", name)
			}
		}
		if hasID {
			return parseHasID(p.key("has_id"), m["has_id"])
		}
		return d.nested(p.key("nested"), m["nested"], level)
	case empty || null:
		name := "is_empty"
		op := OpIsEmpty
		if null {
			name, op = "is_null", OpIsNull
		}
		if len(m) != 1 {
			for _, k := range sortedKeys(m) {
				if k != name {
					return Condition{}, p.key(k).errorf("unexpected beside %s", name)
				}
			}
		}
		np := p.key(name)
		inner, ok := m[name].(map[string]any)
		if !ok {
			return Condition{}, np.errorf(`is %s, want {"key": "..."}`, kindOf(m[name]))
		}
		for _, k := range sortedKeys(inner) {
			if k != "key" {
				return Condition{}, np.key(k).errorf(`unknown field; %s takes only "key"`, name)
			}
		}
		key, keyPath, err := parseKey(np, inner)
		if err != nil {
			return Condition{}, err
		}
		return Condition{Op: op, Key: key, Path: keyPath}, nil
	}
	// A nested filter: any object made only of clauses and min_should (Qdrant reads {} as
	// the filter that matches everything).
	for _, k := range sortedKeys(m) {
		if !slices.Contains(filterMembers, k) {
			return Condition{}, p.key(k).errorf("unknown condition; conditions are key with match, range, values_count or a geo area, is_empty, is_null, has_id, nested, or a nested filter of must, should and must_not")
		}
	}
	f, err := d.filter(p, m, level+1)
	if err != nil {
		return Condition{}, err
	}
	return Condition{Op: OpFilter, Nested: f}, nil
}

// parseHasID reads has_id's list of point ids: unsigned integers (as
// their decimal trawl ids) and strings (a UUID in any form Qdrant takes as
// its lowercase hyphenated trawl id, any other string as itself).
func parseHasID(p path, v any) (Condition, error) {
	a, ok := v.([]any)
	if !ok {
		return Condition{}, p.errorf("is %s, want a list of point ids", kindOf(v))
	}
	c := Condition{Op: OpHasID, IDs: make([]string, len(a)), idSet: make(map[string]struct{}, len(a))}
	for i, e := range a {
		ip := p.index(i)
		switch x := e.(type) {
		case string:
			if x == "" {
				return Condition{}, ip.errorf("is empty, want a point id")
			}
			c.IDs[i] = CanonicalID(x)
		case json.Number:
			n, err := strconv.ParseUint(string(x), 10, 64)
			if err != nil {
				return Condition{}, ip.errorf("is %s, want an unsigned 64-bit integer or a UUID string", x)
			}
			c.IDs[i] = strconv.FormatUint(n, 10)
		default:
			return Condition{}, ip.errorf("is %s, want an unsigned integer or a UUID string", kindOf(e))
		}
		c.idSet[c.IDs[i]] = struct{}{}
	}
	return c, nil
}

// CanonicalID is the trawl id a has_id string names: a UUID in any of the
// forms Qdrant accepts (hyphenated, 32 hex digits, braced, urn:uuid:; any
// case) lowercase and hyphenated, any other string itself.
func CanonicalID(s string) string {
	if u, ok := ParseUUID(s); ok {
		return u
	}
	return s
}

// ParseUUID reads a UUID in any of the forms Qdrant's uuid parsing
// accepts (hyphenated, 32 hex digits, braced, urn:uuid:; any case) and
// returns it lowercase and hyphenated.
func ParseUUID(s string) (string, bool) {
	u := s
	switch {
	case len(u) == 45 && strings.EqualFold(u[:9], "urn:uuid:"):
		u = u[9:]
	case len(u) == 38 && u[0] == '{' && u[37] == '}':
		u = u[1:37]
	}
	switch len(u) {
	case 32:
	case 36:
		if u[8] != '-' || u[13] != '-' || u[18] != '-' || u[23] != '-' {
			return "", false
		}
		u = u[:8] + u[9:13] + u[14:18] + u[19:23] + u[24:]
	default:
		return "", false
	}
	var b [16]byte
	if _, err := hex.Decode(b[:], []byte(u)); err != nil {
		return "", false
	}
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], true
}

// nested reads {"key": K, "filter": {...}}; the inner filter is a level
// deeper and has no has_id (Qdrant's nested filters test payloads only).
func (d *decoder) nested(p path, v any, level int) (Condition, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return Condition{}, p.errorf(`is %s, want {"key": "...", "filter": {...}}`, kindOf(v))
	}
	for _, k := range sortedKeys(m) {
		if k != "key" && k != "filter" {
			return Condition{}, p.key(k).errorf("unknown field; nested takes key and filter")
		}
	}
	key, segs, err := parseKey(p, m)
	if err != nil {
		return Condition{}, err
	}
	fp := p.key("filter")
	raw, present := m["filter"]
	if !present {
		return Condition{}, fp.errorf("is missing")
	}
	f, err := d.filter(fp, raw, level+1)
	if err != nil {
		return Condition{}, err
	}
	if q := findHasID(fp, f); q != nil {
		return Condition{}, q
	}
	return Condition{Op: OpNested, Key: key, Path: segs, Nested: f}, nil
}

// findHasID refuses a has_id inside a nested filter, which Qdrant does
// not evaluate there.
func findHasID(p path, f *Filter) *Error {
	var walk func(f *Filter) bool
	walk = func(f *Filter) bool {
		lists := [][]Condition{f.Must, f.Should, f.MustNot}
		if f.MinShould != nil {
			lists = append(lists, f.MinShould.Conds)
		}
		for _, cs := range lists {
			for i := range cs {
				switch cs[i].Op {
				case OpHasID:
					return true
				case OpFilter:
					if walk(cs[i].Nested) {
						return true
					}
				}
			}
		}
		return false
	}
	if walk(f) {
		return p.errorf("has a has_id condition; inside nested, conditions test the array's elements, which have no ids")
	}
	return nil
}

func parseKey(p path, m map[string]any) (string, []string, error) {
	kp := p.key("key")
	raw, ok := m["key"]
	if !ok {
		return "", nil, kp.errorf("is missing")
	}
	k, ok := raw.(string)
	if !ok {
		return "", nil, kp.errorf("is %s, want a string", kindOf(raw))
	}
	segs, ok := splitKey(k)
	if !ok {
		if k == "" {
			return "", nil, kp.errorf("is empty")
		}
		return "", nil, kp.errorf("%q has an empty segment; a key is a dotted path like meta.draft", k)
	}
	if strings.ContainsAny(k, "[]") {
		// Qdrant reads a[] and a[0] as array paths; trawl's keys walk
		// objects only, so such a key is refused rather than read as a
		// name.
		return "", nil, kp.errorf("%q: the [] array path syntax is not supported; a nested condition tests the objects of an array", k)
	}
	return k, segs, nil
}

func (d *decoder) keyed(p path, m map[string]any) (Condition, error) {
	key, segs, err := parseKey(p, m)
	if err != nil {
		return Condition{}, err
	}
	ops := 0
	for _, k := range sortedKeys(m) {
		switch k {
		case "key", "text_index":
		case "match", "range", "values_count", "geo_radius", "geo_bounding_box", "geo_polygon":
			ops++
		default:
			if unsupported[k] {
				return Condition{}, p.key(k).errorf("is not supported; a keyed condition has match, range, values_count, geo_radius, geo_bounding_box or geo_polygon")
			}
			return Condition{}, p.key(k).errorf("unknown field; a keyed condition has match, range, values_count, geo_radius, geo_bounding_box or geo_polygon")
		}
	}
	match, hasMatch := m["match"]
	rng, hasRange := m["range"]
	count, hasCount := m["values_count"]
	if _, ok := m["text_index"]; ok && !hasMatch {
		return Condition{}, p.key("text_index").errorf("goes with match.text or match.text_any only")
	}
	switch {
	case ops > 1:
		return Condition{}, p.errorf("has more than one of match, range, values_count, geo_radius, geo_bounding_box and geo_polygon; give one")
	case ops == 0:
		return Condition{}, p.errorf("has a key but no match, range, values_count or geo area")
	case m["geo_radius"] != nil || m["geo_bounding_box"] != nil || m["geo_polygon"] != nil:
		c, err := parseGeo(p, m)
		c.Key, c.Path = key, segs
		return c, err
	case hasCount:
		r, err := parseCount(p.key("values_count"), count)
		return Condition{Op: OpValuesCount, Key: key, Path: segs, Range: r}, err
	case hasMatch:
		c, err := parseMatch(p.key("match"), match)
		c.Key, c.Path = key, segs
		if _, ok := m["text_index"]; ok && err == nil {
			c.TextIndex, err = parseConditionTextIndex(p.key("text_index"), c, m["text_index"])
		}
		return c, err
	case hasRange:
		if isDatetimeRange(rng) {
			t, err := parseTimeRange(p.key("range"), rng)
			return Condition{Op: OpDatetime, Key: key, Path: segs, Times: t}, err
		}
		r, err := parseRange(p.key("range"), rng)
		return Condition{Op: OpRange, Key: key, Path: segs, Range: r}, err
	}
	// The one operator is a geo area given as null.
	return Condition{}, p.errorf("has a null geo area")
}

// parseConditionTextIndex reads a condition's text_index: the text index
// its match.text or match.text_any matches tokens by (Condition.TextIndex).
func parseConditionTextIndex(p path, c Condition, v any) (*TextIndex, error) {
	if !(c.Op == OpText && c.Text == "text" || c.Op == OpTextAny) {
		return nil, p.errorf("goes with match.text or match.text_any only")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, p.errorf("is %s, want a text index's params object", kindOf(v))
	}
	t, err := parseTextIndex(p, m)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// isDatetimeRange reports a range whose bounds are strings: Qdrant reads
// a range as numbers or, failing that, as datetimes.
func isDatetimeRange(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for _, x := range m {
		if _, ok := x.(string); ok {
			return true
		}
	}
	return false
}

func parseTimeRange(p path, v any) (TimeRange, error) {
	m := v.(map[string]any)
	var r TimeRange
	for _, k := range sortedKeys(m) {
		bp := p.key(k)
		var dst **time.Time
		switch k {
		case "gt":
			dst = &r.GT
		case "gte":
			dst = &r.GTE
		case "lt":
			dst = &r.LT
		case "lte":
			dst = &r.LTE
		default:
			return TimeRange{}, bp.errorf("unknown bound; range takes gt, gte, lt, lte")
		}
		switch x := m[k].(type) {
		case nil:
		case string:
			t, err := ParseDatetime(x)
			if err != nil {
				return TimeRange{}, bp.errorf("%v", err)
			}
			*dst = &t
		default:
			return TimeRange{}, bp.errorf("is %s, but another bound is a datetime string; a range is all numbers or all datetimes", kindOf(x))
		}
	}
	return r, nil
}

func parseMatch(p path, v any) (Condition, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return Condition{}, p.errorf(`is %s, want {"value": ...}, {"any": [...]}, {"except": [...]} or {"text": "..."}`, kindOf(v))
	}
	if len(m) != 1 {
		if len(m) == 0 {
			return Condition{}, p.errorf("is empty; give one of value, any, except, text, text_any or phrase")
		}
		return Condition{}, p.errorf("has %d operators; give one of value, any, except, text, text_any or phrase", len(m))
	}
	for k, x := range m {
		op := p.key(k)
		switch k {
		case "text", "phrase", "text_any":
			s, ok := x.(string)
			if !ok {
				return Condition{}, op.errorf("is %s, want a string", kindOf(x))
			}
			if k == "text_any" {
				return Condition{Op: OpTextAny, Value: Value{Type: String, Str: s}}, nil
			}
			return Condition{Op: OpText, Text: k, Value: Value{Type: String, Str: s}}, nil
		case "value":
			w, err := parseValue(op, x, true)
			return Condition{Op: OpMatch, Value: w}, err
		case "uuid", "uuid_any", "uuid_except":
			return parseUUIDMatch(op, k, x)
		case "any", "except":
			a, ok := x.([]any)
			if !ok {
				return Condition{}, op.errorf("is %s, want a list of strings or of integers", kindOf(x))
			}
			ws := make([]Value, len(a))
			for i, e := range a {
				w, err := parseValue(op.index(i), e, false)
				if err != nil {
					return Condition{}, err
				}
				if i > 0 && w.Type != ws[0].Type {
					return Condition{}, op.index(i).errorf("is %s, but the list holds %s; a list is all strings or all integers", typeName(w.Type), typeName(ws[0].Type))
				}
				ws[i] = w
			}
			c := Condition{Op: OpAny, Values: ws}
			if k == "except" {
				c.Op = OpExcept
			}
			return c, nil
		}
		if unsupported[k] {
			return Condition{}, op.errorf("is not supported; match takes value, any, except, text, text_any or phrase")
		}
		return Condition{}, op.errorf("unknown operator; match takes value, any, except, text, text_any or phrase")
	}
	panic("unreachable")
}

// parseUUIDMatch reads trawl's uuid match operators, what a match on a
// key with a uuid payload index means (Condition.UUID): "uuid" one UUID,
// "uuid_any" and "uuid_except" a list of them, each in any form
// ParseUUID reads.
func parseUUIDMatch(op path, k string, x any) (Condition, error) {
	one := func(p path, v any) (Value, error) {
		s, ok := v.(string)
		if !ok {
			return Value{}, p.errorf("is %s, want a UUID string", kindOf(v))
		}
		u, ok := ParseUUID(s)
		if !ok {
			return Value{}, p.errorf("%q is not a UUID", s)
		}
		return Value{Type: String, Str: u}, nil
	}
	if k == "uuid" {
		w, err := one(op, x)
		return Condition{Op: OpMatch, UUID: true, Value: w}, err
	}
	a, ok := x.([]any)
	if !ok {
		return Condition{}, op.errorf("is %s, want a list of UUID strings", kindOf(x))
	}
	c := Condition{Op: OpAny, UUID: true, Values: make([]Value, len(a))}
	if k == "uuid_except" {
		c.Op = OpExcept
	}
	for i, e := range a {
		w, err := one(op.index(i), e)
		if err != nil {
			return Condition{}, err
		}
		c.Values[i] = w
	}
	return c, nil
}

func typeName(t Type) string {
	switch t {
	case String:
		return "a string"
	case Integer:
		return "an integer"
	}
	return "a boolean"
}

// parseValue reads a match operand: a string, an integer (an integer
// literal within int64) or, for value only, a boolean.
func parseValue(p path, v any, bools bool) (Value, error) {
	switch x := v.(type) {
	case string:
		return Value{Type: String, Str: x}, nil
	case bool:
		if bools {
			return Value{Type: Bool, Bool: x}, nil
		}
	case json.Number:
		if n, err := number(x); err == nil {
			if i, ok := n.(int64); ok {
				return Value{Type: Integer, Int: i}, nil
			}
		}
	}
	if bools {
		return Value{}, p.errorf("is %s, want a string, an integer or a boolean", kindOf(v))
	}
	return Value{}, p.errorf("is %s, want a string or an integer", kindOf(v))
}

func parseRange(p path, v any) (Range, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return Range{}, p.errorf("is %s, want an object of gt, gte, lt, lte", kindOf(v))
	}
	var r Range
	for _, k := range sortedKeys(m) {
		bp := p.key(k)
		var dst **float64
		switch k {
		case "gt":
			dst = &r.GT
		case "gte":
			dst = &r.GTE
		case "lt":
			dst = &r.LT
		case "lte":
			dst = &r.LTE
		default:
			return Range{}, bp.errorf("unknown bound; range takes gt, gte, lt, lte")
		}
		switch x := m[k].(type) {
		case nil:
			continue
		case json.Number:
			n, err := number(x)
			if err != nil {
				return Range{}, bp.errorf("%v", err)
			}
			var f float64
			switch n := n.(type) {
			case int64:
				f = float64(n)
			case float64:
				f = n
			}
			*dst = &f
		default:
			return Range{}, bp.errorf("is %s, want a number", kindOf(m[k]))
		}
	}
	if r.GT == nil && r.GTE == nil && r.LT == nil && r.LTE == nil {
		return Range{}, p.errorf("needs at least one of gt, gte, lt, lte")
	}
	return r, nil
}

// parseCount reads values_count's bounds: Qdrant's are whole numbers of
// values, so a fraction or a negative bound is refused rather than
// rounded.
func parseCount(p path, v any) (Range, error) {
	if isDatetimeRange(v) {
		return Range{}, p.errorf("has a datetime bound; values_count takes numbers of values")
	}
	r, err := parseRange(p, v)
	if err != nil {
		return Range{}, err
	}
	for _, bd := range r.bounds() {
		if bd.v != nil && (*bd.v < 0 || *bd.v != math.Trunc(*bd.v)) {
			return Range{}, p.key(bd.name).errorf("is %v, want a whole number of values, 0 or more", *bd.v)
		}
	}
	return r, nil
}

// parseGeo reads a keyed condition's geo area: geo_radius {"center",
// "radius"}, geo_bounding_box {"top_left", "bottom_right"} or geo_polygon
// {"exterior", "interiors"}, points as {"lon", "lat"} within
// [-180, 180] and [-90, 90], rings of at least 4 points, closed.
func parseGeo(p path, m map[string]any) (Condition, error) {
	var name string
	var op Op
	switch {
	case m["geo_radius"] != nil:
		name, op = "geo_radius", OpGeoRadius
	case m["geo_bounding_box"] != nil:
		name, op = "geo_bounding_box", OpGeoBox
	default:
		name, op = "geo_polygon", OpGeoPolygon
	}
	gp := p.key(name)
	g := &Geo{}
	obj, ok := m[name].(map[string]any)
	var fields []string
	switch op {
	case OpGeoRadius:
		fields = []string{"center", "radius"}
	case OpGeoBox:
		fields = []string{"top_left", "bottom_right"}
	default:
		fields = []string{"exterior", "interiors"}
	}
	if !ok {
		return Condition{}, gp.errorf("is %s, want an object of %s", kindOf(m[name]), strings.Join(fields, " and "))
	}
	for _, k := range sortedKeys(obj) {
		if !slices.Contains(fields, k) {
			return Condition{}, gp.key(k).errorf("unknown field; %s takes %s", name, strings.Join(fields, " and "))
		}
	}
	for _, k := range fields[:1] {
		if _, present := obj[k]; !present {
			return Condition{}, gp.key(k).errorf("is missing")
		}
	}
	var err error
	switch op {
	case OpGeoRadius:
		if g.Center, err = parseGeoPoint(gp.key("center"), obj["center"]); err != nil {
			return Condition{}, err
		}
		rp := gp.key("radius")
		n, ok := obj["radius"].(json.Number)
		if !ok {
			if _, present := obj["radius"]; !present {
				return Condition{}, rp.errorf("is missing")
			}
			return Condition{}, rp.errorf("is %s, want a number of metres", kindOf(obj["radius"]))
		}
		if g.Radius, err = parseFloat(rp, n); err != nil {
			return Condition{}, err
		}
	case OpGeoBox:
		if g.TopLeft, err = parseGeoPoint(gp.key("top_left"), obj["top_left"]); err != nil {
			return Condition{}, err
		}
		bp := gp.key("bottom_right")
		if _, present := obj["bottom_right"]; !present {
			return Condition{}, bp.errorf("is missing")
		}
		if g.BottomRight, err = parseGeoPoint(bp, obj["bottom_right"]); err != nil {
			return Condition{}, err
		}
	default:
		if g.Exterior, err = parseRing(gp.key("exterior"), obj["exterior"]); err != nil {
			return Condition{}, err
		}
		ip := gp.key("interiors")
		switch x := obj["interiors"].(type) {
		case nil:
		case []any:
			for i, r := range x {
				ring, err := parseRing(ip.index(i), r)
				if err != nil {
					return Condition{}, err
				}
				g.Interiors = append(g.Interiors, ring)
			}
		default:
			return Condition{}, ip.errorf("is %s, want a list of rings", kindOf(x))
		}
	}
	return Condition{Op: op, Geo: g}, nil
}

func parseFloat(p path, n json.Number) (float64, error) {
	x, err := number(n)
	if err != nil {
		return 0, p.errorf("%v", err)
	}
	f, _ := asFloat(x)
	return f, nil
}

func parseGeoPoint(p path, v any) (GeoPoint, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return GeoPoint{}, p.errorf(`is %s, want {"lon": ..., "lat": ...}`, kindOf(v))
	}
	for _, k := range sortedKeys(m) {
		if k != "lon" && k != "lat" {
			return GeoPoint{}, p.key(k).errorf("unknown field; a geo point has lon and lat")
		}
	}
	var out [2]float64
	for i, k := range []string{"lon", "lat"} {
		kp := p.key(k)
		n, ok := m[k].(json.Number)
		if !ok {
			if _, present := m[k]; !present {
				return GeoPoint{}, kp.errorf("is missing")
			}
			return GeoPoint{}, kp.errorf("is %s, want a number of degrees", kindOf(m[k]))
		}
		f, err := parseFloat(kp, n)
		if err != nil {
			return GeoPoint{}, err
		}
		if lim := []float64{180, 90}[i]; f < -lim || f > lim {
			return GeoPoint{}, kp.errorf("is %v, want a number within [-%v, %v]", f, lim, lim)
		}
		out[i] = f
	}
	return GeoPoint{Lon: out[0], Lat: out[1]}, nil
}

// parseRing reads {"points": [...]}: at least 4 points, the last the
// first (within float64 epsilon, as Qdrant checks).
func parseRing(p path, v any) ([]GeoPoint, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, p.errorf(`is %s, want {"points": [...]}`, kindOf(v))
	}
	for _, k := range sortedKeys(m) {
		if k != "points" {
			return nil, p.key(k).errorf("unknown field; a ring has points")
		}
	}
	pp := p.key("points")
	a, ok := m["points"].([]any)
	if !ok {
		if _, present := m["points"]; !present {
			return nil, pp.errorf("is missing")
		}
		return nil, pp.errorf("is %s, want a list of geo points", kindOf(m["points"]))
	}
	if len(a) < 4 {
		return nil, pp.errorf("has %d points; a polygon ring has at least 4, the last the first", len(a))
	}
	ring := make([]GeoPoint, len(a))
	for i, e := range a {
		pt, err := parseGeoPoint(pp.index(i), e)
		if err != nil {
			return nil, err
		}
		ring[i] = pt
	}
	first, last := ring[0], ring[len(ring)-1]
	if math.Abs(first.Lat-last.Lat) > epsilon || math.Abs(first.Lon-last.Lon) > epsilon {
		return nil, pp.errorf("is not closed; its last point must be its first")
	}
	return ring, nil
}

// epsilon is Rust's f64::EPSILON.
const epsilon = 2.220446049250313e-16
