package filter

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Limits of a filter (DESIGN.md): how deep filters nest (the filter
// itself is level one) and how many conditions it holds in all, nested
// filters counting as conditions too.
const (
	MaxNesting    = 8
	MaxConditions = 64
)

// Filter is a parsed filter: every Must condition holds, at least one
// Should condition holds when there are any, and no MustNot condition
// holds. The zero Filter matches every document.
type Filter struct {
	Must    []Condition
	Should  []Condition
	MustNot []Condition
	// MinShould, when set, needs at least Count of its conditions to
	// hold ({"min_should": {"conditions": [...], "min_count": n}}).
	MinShould *MinShould
}

// MinShould is a filter's min_should clause: Count (at least 1) of Conds
// hold.
type MinShould struct {
	Conds []Condition
	Count int
}

// Op is what a Condition tests.
type Op uint8

// The condition operators.
const (
	// OpMatch: {"key", "match": {"value": v}}: some value at Key equals
	// Value (same type).
	OpMatch Op = iota + 1
	// OpAny: {"key", "match": {"any": [...]}}: some value is in Values.
	OpAny
	// OpExcept: {"key", "match": {"except": [...]}}: some value that is
	// not null is not in Values (a value of another type is not in
	// them), as Qdrant checks a payload: match.any negated, value by value.
	OpExcept
	// OpRange: {"key", "range": {...}}: some number within Range.
	OpRange
	// OpIsEmpty: {"is_empty": {"key"}}: Key is missing, null or [].
	OpIsEmpty
	// OpIsNull: {"is_null": {"key"}}: Key is present and null.
	OpIsNull
	// OpFilter: a nested filter object, in Nested.
	OpFilter
	// OpValuesCount: {"key", "values_count": {...}}: the number of values
	// at Key is within Range, counted as Qdrant counts them: an array its
	// length, null or a missing key 0, any other value 1.
	OpValuesCount
	// OpHasID: {"has_id": [id, ...]}: the point's id is one of IDs.
	OpHasID
	// OpNested: {"nested": {"key", "filter"}}: the value at Key is an
	// array and some object element of it matches Nested, keys relative
	// to the element.
	OpNested
	// OpDatetime: {"key", "range": {...}} with RFC 3339 bounds: some
	// string at Key that parses as a datetime (ParseDatetime) is an
	// instant within Times.
	OpDatetime
	// OpText: {"key", "match": {"text": s}} (and "phrase"): some string
	// at Key contains Value.Str, as Qdrant matches text without a
	// full-text index.
	OpText
	// OpTextAny: {"key", "match": {"text_any": s}}: some string at Key
	// contains one of Value.Str's whitespace-separated words.
	OpTextAny
	// OpGeoRadius, OpGeoBox, OpGeoPolygon: {"key", "geo_radius" |
	// "geo_bounding_box" | "geo_polygon"}: some geo point ({"lon",
	// "lat"}) at Key is within Geo.
	OpGeoRadius
	OpGeoBox
	OpGeoPolygon
)

// Condition is one condition of a filter's clause.
type Condition struct {
	Op  Op
	Key string
	// Path is Key split at its dots.
	Path   []string
	Value  Value   // OpMatch; OpText, OpTextAny (a String)
	Values []Value // OpAny, OpExcept: all of one Type (Type String when empty)
	Range  Range   // OpRange, OpValuesCount (whole, non-negative bounds)
	Nested *Filter // OpFilter, OpNested
	// IDs are OpHasID's ids as trawl ids (CanonicalID), in the order
	// given; idSet holds them for lookup.
	IDs   []string
	idSet map[string]struct{}
	Times TimeRange // OpDatetime
	Geo   *Geo      // OpGeoRadius, OpGeoBox, OpGeoPolygon
	// Text names the match operator of OpText: "text" or "phrase".
	Text string
	// TextIndex, set on an OpText ("text") or OpTextAny condition, makes
	// it match tokens as a text payload index on Key does
	// (WithTextIndexes): its canonical JSON carries it as the
	// condition's "text_index".
	TextIndex *TextIndex
	// UUID makes OpMatch, OpAny and OpExcept compare as UUIDs, as Qdrant
	// matches a key with a uuid payload index (the match operators uuid,
	// uuid_any, uuid_except; WithUUIDKeys): Value and Values are
	// canonical UUIDs (ParseUUID), a payload string counts by the UUID it
	// parses as, whatever its form, and a value that is no UUID string
	// never counts, not even for except (the index holds UUIDs only).
	UUID bool
}

// HasID reports whether id is one of an OpHasID condition's ids.
func (c *Condition) HasID(id string) bool {
	if c.idSet == nil {
		return slices.Contains(c.IDs, id) // a Condition not made by Parse
	}
	_, ok := c.idSet[id]
	return ok
}

// Type is the type of a Value.
type Type uint8

// Value types: the ones Qdrant's match takes.
const (
	String Type = iota + 1
	Integer
	Bool
)

// Value is a match operand.
type Value struct {
	Type Type
	Str  string
	Int  int64
	Bool bool
}

// Range bounds numbers; a nil bound is absent, and at least one is set.
type Range struct {
	GT, GTE, LT, LTE *float64
}

// bound is one of a Range's bounds by its JSON name.
type bound struct {
	name string
	v    *float64
}

// bounds lists r's bounds in canonical order, absent ones as nil.
func (r Range) bounds() [4]bound {
	return [4]bound{{"gt", r.GT}, {"gte", r.GTE}, {"lt", r.LT}, {"lte", r.LTE}}
}

// Contains reports whether x is within every bound.
func (r Range) Contains(x float64) bool {
	return (r.GT == nil || x > *r.GT) && (r.GTE == nil || x >= *r.GTE) &&
		(r.LT == nil || x < *r.LT) && (r.LTE == nil || x <= *r.LTE)
}

// Empty reports whether f has no conditions (it matches everything).
func (f *Filter) Empty() bool {
	return f == nil || len(f.Must)+len(f.Should)+len(f.MustNot) == 0 && f.MinShould == nil
}

// Match evaluates f on a document's payload as DecodePayload returns it
// (nil: a document without payload), for a document whose id is not
// known: has_id holds for none. A nil Filter matches everything.
func (f *Filter) Match(doc map[string]any) bool { return f.MatchPoint("", doc) }

// MatchPoint evaluates f on the document with id and payload doc.
func (f *Filter) MatchPoint(id string, doc map[string]any) bool {
	if f == nil {
		return true
	}
	for i := range f.Must {
		if !f.Must[i].MatchPoint(id, doc) {
			return false
		}
	}
	if len(f.Should) > 0 {
		ok := false
		for i := range f.Should {
			if f.Should[i].MatchPoint(id, doc) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	if ms := f.MinShould; ms != nil {
		n := 0
		for i := range ms.Conds {
			if n >= ms.Count {
				break
			}
			if ms.Conds[i].MatchPoint(id, doc) {
				n++
			}
		}
		if n < ms.Count {
			return false
		}
	}
	for i := range f.MustNot {
		if f.MustNot[i].MatchPoint(id, doc) {
			return false
		}
	}
	return true
}

// Lookup finds the value at a dotted path: each segment but the last must
// name an object. An array on the way is not walked into, as Qdrant reads
// a key without its [] syntax: objects inside arrays are reached by a
// nested condition.
func Lookup(doc map[string]any, p []string) (any, bool) {
	var cur any = doc
	for _, seg := range p {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[seg]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// Match evaluates one condition on a document's payload (has_id holds
// for no document: see MatchPoint).
func (c *Condition) Match(doc map[string]any) bool { return c.MatchPoint("", doc) }

// MatchPoint evaluates one condition on the document with id and payload
// doc.
func (c *Condition) MatchPoint(id string, doc map[string]any) bool {
	switch c.Op {
	case OpFilter:
		return c.Nested.MatchPoint(id, doc)
	case OpHasID:
		return c.HasID(id)
	}
	v, found := Lookup(doc, c.Path)
	switch c.Op {
	case OpNested:
		// Qdrant reads the key as key[]: the elements of an array, of
		// which only objects can match a filter's keys.
		a, _ := v.([]any)
		for _, e := range a {
			if m, ok := e.(map[string]any); ok && c.Nested.MatchPoint(id, m) {
				return true
			}
		}
		return false
	case OpIsEmpty:
		if !found || v == nil {
			return true
		}
		a, isArr := v.([]any)
		return isArr && len(a) == 0
	case OpIsNull:
		return found && v == nil
	case OpValuesCount:
		return c.Range.Contains(float64(valuesCount(v, found)))
	}
	if !found || v == nil {
		return false
	}
	if c.TextIndex != nil && (c.Op == OpText || c.Op == OpTextAny) {
		return c.matchTokens(v)
	}
	if a, ok := v.([]any); ok {
		for _, e := range a {
			if c.matchScalar(e) {
				return true
			}
		}
		return false
	}
	return c.matchScalar(v)
}

// valuesCount is how many values a values_count condition sees at a key.
func valuesCount(v any, found bool) int {
	if !found || v == nil {
		return 0
	}
	if a, ok := v.([]any); ok {
		return len(a)
	}
	return 1
}

// matchScalar tests one scalar value (an array element or the value
// itself) for a match or range condition.
func (c *Condition) matchScalar(v any) bool {
	if c.UUID {
		s, ok := v.(string)
		if !ok {
			return false
		}
		u, ok := ParseUUID(s)
		if !ok {
			return false
		}
		v = u
		if c.Op == OpExcept {
			return !slices.ContainsFunc(c.Values, func(w Value) bool { return w.Str == u })
		}
	}
	switch c.Op {
	case OpMatch:
		return c.Value.Equal(v)
	case OpAny:
		for _, w := range c.Values {
			if w.Equal(v) {
				return true
			}
		}
		return false
	case OpExcept:
		if v == nil {
			return false
		}
		for _, w := range c.Values {
			if w.Equal(v) {
				return false
			}
		}
		return true
	case OpRange:
		switch x := v.(type) {
		case int64:
			return c.Range.Contains(float64(x))
		case float64:
			return c.Range.Contains(x)
		}
	case OpDatetime:
		if s, ok := v.(string); ok {
			t, err := ParseDatetime(s)
			return err == nil && c.Times.Contains(t)
		}
	case OpText:
		s, ok := v.(string)
		return ok && strings.Contains(s, c.Value.Str)
	case OpTextAny:
		s, ok := v.(string)
		return ok && slices.ContainsFunc(strings.Fields(c.Value.Str), func(w string) bool { return strings.Contains(s, w) })
	case OpGeoRadius, OpGeoBox, OpGeoPolygon:
		p, ok := geoPoint(v)
		return ok && c.Geo.Contains(c.Op, p)
	}
	return false
}

// Equal reports whether a payload scalar equals the value, of the same
// type: a float payload number never equals an integer (2020.0 is not
// 2020, as in Qdrant, whose integer match reads integers only).
func (w Value) Equal(v any) bool {
	switch x := v.(type) {
	case string:
		return w.Type == String && w.Str == x
	case int64:
		return w.Type == Integer && w.Int == x
	case bool:
		return w.Type == Bool && w.Bool == x
	}
	return false
}

// MarshalJSON writes the filter's canonical form: clauses as lists in the
// order must, should, must_not, empty ones left out; Parse reads it back
// to an equal Filter.
func (f *Filter) MarshalJSON() ([]byte, error) {
	return f.appendJSON(nil), nil
}

func (f *Filter) appendJSON(b []byte) []byte {
	b = append(b, '{')
	first := true
	for _, cl := range [...]struct {
		name  string
		conds []Condition
	}{{"must", f.Must}, {"should", f.Should}, {"must_not", f.MustNot}} {
		if len(cl.conds) == 0 {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendString(b, cl.name)
		b = append(b, ":["...)
		for i := range cl.conds {
			if i > 0 {
				b = append(b, ',')
			}
			b = cl.conds[i].appendJSON(b)
		}
		b = append(b, ']')
	}
	if ms := f.MinShould; ms != nil {
		if !first {
			b = append(b, ',')
		}
		b = append(b, `"min_should":{"conditions":[`...)
		for i := range ms.Conds {
			if i > 0 {
				b = append(b, ',')
			}
			b = ms.Conds[i].appendJSON(b)
		}
		b = append(b, `],"min_count":`...)
		b = appendInt(b, int64(ms.Count))
		b = append(b, '}')
	}
	return append(b, '}')
}

func (c *Condition) appendJSON(b []byte) []byte {
	keyed := func(b []byte) []byte {
		b = append(b, `{"key":`...)
		return appendString(b, c.Key)
	}
	switch c.Op {
	case OpFilter:
		return c.Nested.appendJSON(b)
	case OpHasID:
		b = append(b, `{"has_id":[`...)
		for i, id := range c.IDs {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, id)
		}
		return append(b, "]}"...)
	case OpNested:
		b = append(b, `{"nested":`...)
		b = append(keyed(b), `,"filter":`...)
		b = c.Nested.appendJSON(b)
		return append(b, "}}"...)
	case OpText, OpTextAny:
		op := c.Text
		if c.Op == OpTextAny {
			op = "text_any"
		}
		b = append(keyed(b), `,"match":{`...)
		b = appendString(b, op)
		b = append(b, ':')
		b = appendString(b, c.Value.Str)
		b = append(b, '}')
		if c.TextIndex != nil {
			b = append(b, `,"text_index":`...)
			b = c.TextIndex.appendJSON(b)
		}
		return append(b, '}')
	case OpDatetime:
		b = append(keyed(b), `,"range":{`...)
		first := true
		for _, bd := range c.Times.bounds() {
			if bd.t == nil {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendString(b, bd.name)
			b = append(b, ':')
			b = appendString(b, bd.t.Format(time.RFC3339Nano))
		}
		return append(b, "}}"...)
	case OpGeoRadius, OpGeoBox, OpGeoPolygon:
		return append(c.Geo.appendJSON(keyed(b), c.Op), '}')
	case OpIsEmpty, OpIsNull:
		name := `{"is_empty":`
		if c.Op == OpIsNull {
			name = `{"is_null":`
		}
		b = append(b, name...)
		b = keyed(b)
		return append(b, "}}"...)
	case OpMatch:
		op := `,"match":{"value":`
		if c.UUID {
			op = `,"match":{"uuid":`
		}
		b = append(keyed(b), op...)
		b = c.Value.appendJSON(b)
		return append(b, "}}"...)
	case OpAny, OpExcept:
		name := `,"match":{"any":[`
		switch {
		case c.UUID && c.Op == OpExcept:
			name = `,"match":{"uuid_except":[`
		case c.UUID:
			name = `,"match":{"uuid_any":[`
		case c.Op == OpExcept:
			name = `,"match":{"except":[`
		}
		b = append(keyed(b), name...)
		for i, v := range c.Values {
			if i > 0 {
				b = append(b, ',')
			}
			b = v.appendJSON(b)
		}
		return append(b, "]}}"...)
	case OpRange, OpValuesCount:
		name := `,"range":{`
		if c.Op == OpValuesCount {
			name = `,"values_count":{`
		}
		b = append(keyed(b), name...)
		first := true
		for _, bd := range c.Range.bounds() {
			if bd.v == nil {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendString(b, bd.name)
			b = append(b, ':')
			b = appendFloat(b, *bd.v)
		}
		return append(b, "}}"...)
	}
	return append(b, "{}"...)
}

func (w Value) appendJSON(b []byte) []byte {
	switch w.Type {
	case String:
		return appendString(b, w.Str)
	case Integer:
		return appendInt(b, w.Int)
	}
	if w.Bool {
		return append(b, "true"...)
	}
	return append(b, "false"...)
}

func appendString(b []byte, s string) []byte {
	enc, _ := json.Marshal(s) // a string always marshals
	return append(b, enc...)
}

// Keys lists the distinct keys f's conditions test, sorted (for logs and
// tests); a nested condition's key stands for the keys inside it.
func (f *Filter) Keys() []string {
	var out []string
	var walk func(f *Filter)
	walk = func(f *Filter) {
		lists := [][]Condition{f.Must, f.Should, f.MustNot}
		if f.MinShould != nil {
			lists = append(lists, f.MinShould.Conds)
		}
		for _, cs := range lists {
			for i := range cs {
				switch cs[i].Op {
				case OpFilter:
					walk(cs[i].Nested)
				case OpHasID:
				default:
					out = append(out, cs[i].Key)
				}
			}
		}
	}
	if f != nil {
		walk(f)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// splitKey splits a dotted key, reporting whether every segment is
// non-empty.
func splitKey(k string) ([]string, bool) {
	if k == "" {
		return nil, false
	}
	p := strings.Split(k, ".")
	for _, s := range p {
		if s == "" {
			return nil, false
		}
	}
	return p, true
}

func appendInt(b []byte, i int64) []byte     { return strconv.AppendInt(b, i, 10) }
func appendFloat(b []byte, f float64) []byte { return strconv.AppendFloat(b, f, 'g', -1, 64) }

// WithUUIDKeys is f with its match conditions on the keys uuid holds
// (payload indexes declared uuid) comparing as UUIDs (Condition.UUID),
// as Qdrant's uuid index answers them: match.value, match.any and
// match.except of strings that all parse as UUIDs. A condition with an
// operand that is no UUID (or not a string) keeps its plain meaning, as
// Qdrant falls back to checking the payload when its index cannot read
// the operand. Conditions inside nested (keys relative to an array's
// elements) are left as they are. f itself is not changed: a copy is
// returned when a condition changes.
func (f *Filter) WithUUIDKeys(uuid map[string]bool) *Filter {
	if f == nil || len(uuid) == 0 {
		return f
	}
	out, changed := *f, false
	for _, cl := range []*[]Condition{&out.Must, &out.Should, &out.MustNot} {
		if cs, ok := uuidConds(*cl, uuid); ok {
			*cl, changed = cs, true
		}
	}
	if ms := f.MinShould; ms != nil {
		if cs, ok := uuidConds(ms.Conds, uuid); ok {
			out.MinShould, changed = &MinShould{Conds: cs, Count: ms.Count}, true
		}
	}
	if !changed {
		return f
	}
	return &out
}

// uuidConds is conds with WithUUIDKeys applied, and whether any changed.
func uuidConds(conds []Condition, uuid map[string]bool) ([]Condition, bool) {
	var out []Condition
	for i, c := range conds {
		nc, ok := c.withUUID(uuid)
		if !ok {
			continue
		}
		if out == nil {
			out = slices.Clone(conds)
		}
		out[i] = nc
	}
	return out, out != nil
}

func (c Condition) withUUID(uuid map[string]bool) (Condition, bool) {
	if c.Op == OpFilter {
		n := c.Nested.WithUUIDKeys(uuid)
		if n == c.Nested {
			return c, false
		}
		c.Nested = n
		return c, true
	}
	if c.UUID || !uuid[c.Key] {
		return c, false
	}
	switch c.Op {
	case OpMatch:
		u, ok := uuidOf(c.Value)
		if !ok {
			return c, false
		}
		c.Value, c.UUID = u, true
		return c, true
	case OpAny, OpExcept:
		vs := make([]Value, len(c.Values))
		for i, v := range c.Values {
			u, ok := uuidOf(v)
			if !ok {
				return c, false
			}
			vs[i] = u
		}
		c.Values, c.UUID = vs, true
		return c, true
	}
	return c, false
}

func uuidOf(v Value) (Value, bool) {
	if v.Type != String {
		return Value{}, false
	}
	u, ok := ParseUUID(v.Str)
	return Value{Type: String, Str: u}, ok
}
