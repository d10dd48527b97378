package filter

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
)

// maxJSONDepth bounds the JSON nesting Parse reads before checking the
// filter's own nesting: a filter of MaxNesting levels is at most about
// three JSON levels each (filter, clause list, condition).
const maxJSONDepth = 4*MaxNesting + 4

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

func (d *decoder) filter(p path, v any, level int) (*Filter, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, p.errorf("is %s, want a filter object", kindOf(v))
	}
	if level > MaxNesting {
		return nil, p.errorf("is nested deeper than %d filters", MaxNesting)
	}
	for _, k := range sortedKeys(m) {
		if !slices.Contains(clauses, k) {
			return nil, p.key(k).errorf("unknown clause; a filter has must, should and must_not")
		}
	}
	f := &Filter{}
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

// unsupported names Qdrant conditions and operators outside trawl's subset,
// so the error says so rather than "unknown".
var unsupported = map[string]bool{
	"has_id": true, "nested": true, "geo_radius": true, "geo_bounding_box": true,
	"geo_polygon": true, "text": true, "text_any": true, "phrase": true, "has_vector": true, "min_should": true,
}

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
			return Condition{}, p.key(k).errorf("is not supported; conditions are key with match, range or values_count, is_empty, is_null, or a nested filter")
		}
	}
	_, keyed := m["key"]
	_, empty := m["is_empty"]
	_, null := m["is_null"]
	switch {
	case keyed:
		return d.keyed(p, m)
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
	// A nested filter: any object made only of clauses (Qdrant reads {} as
	// the filter that matches everything).
	for _, k := range sortedKeys(m) {
		if !slices.Contains(clauses, k) {
			return Condition{}, p.key(k).errorf("unknown condition; conditions are key with match, range or values_count, is_empty, is_null, or a nested filter of must, should and must_not")
		}
	}
	f, err := d.filter(p, m, level+1)
	if err != nil {
		return Condition{}, err
	}
	return Condition{Op: OpFilter, Nested: f}, nil
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
	return k, segs, nil
}

func (d *decoder) keyed(p path, m map[string]any) (Condition, error) {
	key, segs, err := parseKey(p, m)
	if err != nil {
		return Condition{}, err
	}
	for _, k := range sortedKeys(m) {
		if k != "key" && k != "match" && k != "range" && k != "values_count" {
			return Condition{}, p.key(k).errorf("unknown field; a keyed condition has match, range or values_count")
		}
	}
	match, hasMatch := m["match"]
	rng, hasRange := m["range"]
	count, hasCount := m["values_count"]
	switch {
	case hasMatch && hasRange, hasMatch && hasCount, hasRange && hasCount:
		return Condition{}, p.errorf("has more than one of match, range and values_count; give one")
	case hasCount:
		r, err := parseCount(p.key("values_count"), count)
		return Condition{Op: OpValuesCount, Key: key, Path: segs, Range: r}, err
	case hasMatch:
		c, err := parseMatch(p.key("match"), match)
		c.Key, c.Path = key, segs
		return c, err
	case hasRange:
		r, err := parseRange(p.key("range"), rng)
		return Condition{Op: OpRange, Key: key, Path: segs, Range: r}, err
	}
	return Condition{}, p.errorf("has a key but no match, range or values_count")
}

func parseMatch(p path, v any) (Condition, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return Condition{}, p.errorf(`is %s, want {"value": ...}, {"any": [...]} or {"except": [...]}`, kindOf(v))
	}
	if len(m) != 1 {
		if len(m) == 0 {
			return Condition{}, p.errorf("is empty; give one of value, any or except")
		}
		return Condition{}, p.errorf("has %d operators; give one of value, any or except", len(m))
	}
	for k, x := range m {
		op := p.key(k)
		switch k {
		case "value":
			w, err := parseValue(op, x, true)
			return Condition{Op: OpMatch, Value: w}, err
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
			return Condition{}, op.errorf("is not supported; match takes value, any or except")
		}
		return Condition{}, op.errorf("unknown operator; match takes value, any or except")
	}
	panic("unreachable")
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
