package qdrantgrpc

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/trawl-search/trawl/api/internal/wire"
	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/filter"
)

// decodeFilter turns Qdrant's protobuf Filter into trawl's filter through
// Qdrant's filter JSON, the one grammar package filter parses: the message
// is written as the JSON a REST client would send for it (the same
// members, in the same places), so both transports accept, refuse and
// evaluate exactly the same filters, and a refusal names the same place
// ("filter.must[1].range: needs at least one of gt, gte, lt, lte").
// Conditions outside trawl's subset (has_id, nested, geo,
// datetime ranges, full-text matches, min_should) are written under their
// JSON names, which filter refuses by name. Nil is no filter.
func decodeFilter(f *pb.Filter) (*filter.Filter, error) {
	if f == nil {
		return nil, nil
	}
	var w filterWriter
	if err := w.filter(f, "filter", 1); err != nil {
		return nil, err
	}
	return wire.ParseFilter(w.b)
}

type filterWriter struct {
	b     []byte
	conds int
}

func (w *filterWriter) filter(f *pb.Filter, where string, level int) error {
	// filter.Parse refuses these too; stopping here bounds the JSON a
	// deeply nested or huge message would make.
	if level > filter.MaxNesting {
		return wire.Invalid(fmt.Sprintf("filter: is nested deeper than %d filters", filter.MaxNesting))
	}
	w.b = append(w.b, '{')
	first := true
	clause := func(name string, cs []*pb.Condition) error {
		if len(cs) == 0 {
			return nil
		}
		if !first {
			w.b = append(w.b, ',')
		}
		first = false
		w.b = append(w.b, '"')
		w.b = append(w.b, name...)
		w.b = append(w.b, `":[`...)
		for i, c := range cs {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			if err := w.condition(c, fmt.Sprintf("%s.%s[%d]", where, name, i), level); err != nil {
				return err
			}
		}
		w.b = append(w.b, ']')
		return nil
	}
	for _, c := range []struct {
		name string
		cs   []*pb.Condition
	}{{"must", f.GetMust()}, {"should", f.GetShould()}, {"must_not", f.GetMustNot()}} {
		if err := clause(c.name, c.cs); err != nil {
			return err
		}
	}
	if f.MinShould != nil {
		if !first {
			w.b = append(w.b, ',')
		}
		w.b = append(w.b, `"min_should":{}`...)
	}
	w.b = append(w.b, '}')
	return nil
}

func (w *filterWriter) condition(c *pb.Condition, where string, level int) error {
	w.conds++
	if w.conds > filter.MaxConditions {
		return wire.Invalid(fmt.Sprintf("filter: has more than %d conditions", filter.MaxConditions))
	}
	switch x := c.GetConditionOneOf().(type) {
	case *pb.Condition_Field:
		return w.field(x.Field, where)
	case *pb.Condition_IsEmpty:
		w.keyed("is_empty", x.IsEmpty.GetKey())
	case *pb.Condition_IsNull:
		w.keyed("is_null", x.IsNull.GetKey())
	case *pb.Condition_Filter:
		return w.filter(x.Filter, where, level+1)
	case *pb.Condition_HasId:
		w.b = append(w.b, `{"has_id":[]}`...)
	case *pb.Condition_Nested:
		w.b = append(w.b, `{"nested":{}}`...)
	case *pb.Condition_HasVector:
		w.b = append(w.b, `{"has_vector":""}`...)
	default:
		return wire.Invalid(where + ": is empty; want a field, is_empty, is_null or filter condition")
	}
	return nil
}

// keyed writes {"is_empty": {"key": k}} and its kin.
func (w *filterWriter) keyed(name, key string) {
	w.b = append(w.b, `{"`...)
	w.b = append(w.b, name...)
	w.b = append(w.b, `":{"key":`...)
	w.b = appendString(w.b, key)
	w.b = append(w.b, `}}`...)
}

// field writes a FieldCondition as {"key", "match"|"range"|...}; with
// is_empty or is_null true alone, as that condition.
func (w *filterWriter) field(fc *pb.FieldCondition, where string) error {
	others := fc.Match != nil || fc.Range != nil || fc.GeoBoundingBox != nil || fc.GeoRadius != nil ||
		fc.ValuesCount != nil || fc.GeoPolygon != nil || fc.DatetimeRange != nil
	switch {
	case fc.IsEmpty != nil && !*fc.IsEmpty, fc.IsNull != nil && !*fc.IsNull:
		return wire.Invalid(where + ": is_empty or is_null false is not supported; put is_empty or is_null in must_not")
	case fc.IsEmpty != nil && fc.IsNull == nil && !others:
		w.keyed("is_empty", fc.GetKey())
		return nil
	case fc.IsNull != nil && fc.IsEmpty == nil && !others:
		w.keyed("is_null", fc.GetKey())
		return nil
	}
	w.b = append(w.b, `{"key":`...)
	w.b = appendString(w.b, fc.GetKey())
	if fc.Match != nil {
		w.b = append(w.b, `,"match":`...)
		if err := w.match(fc.Match, where+".match"); err != nil {
			return err
		}
	}
	if r := fc.Range; r != nil {
		w.b = append(w.b, `,"range":{`...)
		n := 0
		for _, b := range []struct {
			name string
			v    *float64
		}{{"gt", r.Gt}, {"gte", r.Gte}, {"lt", r.Lt}, {"lte", r.Lte}} {
			if b.v == nil {
				continue
			}
			if math.IsNaN(*b.v) || math.IsInf(*b.v, 0) {
				return wire.Invalid(fmt.Sprintf("%s.range.%s: is %v, want a finite number", where, b.name, *b.v))
			}
			if n > 0 {
				w.b = append(w.b, ',')
			}
			n++
			w.b = append(w.b, '"')
			w.b = append(w.b, b.name...)
			w.b = append(w.b, `":`...)
			w.b = strconv.AppendFloat(w.b, *b.v, 'g', -1, 64)
		}
		w.b = append(w.b, '}')
	}
	if c := fc.ValuesCount; c != nil {
		w.b = append(w.b, `,"values_count":{`...)
		n := 0
		for _, b := range []struct {
			name string
			v    *uint64
		}{{"gt", c.Gt}, {"gte", c.Gte}, {"lt", c.Lt}, {"lte", c.Lte}} {
			if b.v == nil {
				continue
			}
			if n > 0 {
				w.b = append(w.b, ',')
			}
			n++
			w.b = append(w.b, '"')
			w.b = append(w.b, b.name...)
			w.b = append(w.b, `":`...)
			w.b = strconv.AppendUint(w.b, *b.v, 10)
		}
		w.b = append(w.b, '}')
	}
	for _, o := range []struct {
		set  bool
		name string
	}{{fc.GeoBoundingBox != nil, "geo_bounding_box"}, {fc.GeoRadius != nil, "geo_radius"}, {fc.GeoPolygon != nil, "geo_polygon"},
		{fc.DatetimeRange != nil, "datetime_range"},
		{fc.IsEmpty != nil, "is_empty"}, {fc.IsNull != nil, "is_null"}} {
		if o.set {
			w.b = append(w.b, `,"`...)
			w.b = append(w.b, o.name...)
			w.b = append(w.b, `":{}`...)
		}
	}
	w.b = append(w.b, '}')
	return nil
}

func (w *filterWriter) match(m *pb.Match, where string) error {
	switch x := m.GetMatchValue().(type) {
	case *pb.Match_Keyword:
		w.b = append(w.b, `{"value":`...)
		w.b = appendString(w.b, x.Keyword)
	case *pb.Match_Integer:
		w.b = append(w.b, `{"value":`...)
		w.b = strconv.AppendInt(w.b, x.Integer, 10)
	case *pb.Match_Boolean:
		w.b = append(w.b, `{"value":`...)
		w.b = strconv.AppendBool(w.b, x.Boolean)
	case *pb.Match_Keywords:
		w.strings("any", x.Keywords.GetStrings())
	case *pb.Match_Integers:
		w.ints("any", x.Integers.GetIntegers())
	case *pb.Match_ExceptKeywords:
		w.strings("except", x.ExceptKeywords.GetStrings())
	case *pb.Match_ExceptIntegers:
		w.ints("except", x.ExceptIntegers.GetIntegers())
	case *pb.Match_Text:
		w.b = append(w.b, `{"text":""`...)
	case *pb.Match_Phrase:
		w.b = append(w.b, `{"phrase":""`...)
	case *pb.Match_TextAny:
		w.b = append(w.b, `{"text_any":""`...)
	default:
		return wire.Invalid(where + ": is empty; give one of keyword, integer, boolean, keywords, integers, except_keywords or except_integers")
	}
	w.b = append(w.b, '}')
	return nil
}

func (w *filterWriter) strings(op string, ss []string) {
	w.b = append(w.b, `{"`...)
	w.b = append(w.b, op...)
	w.b = append(w.b, `":[`...)
	for i, s := range ss {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = appendString(w.b, s)
	}
	w.b = append(w.b, ']')
}

func (w *filterWriter) ints(op string, is []int64) {
	w.b = append(w.b, `{"`...)
	w.b = append(w.b, op...)
	w.b = append(w.b, `":[`...)
	for i, n := range is {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = strconv.AppendInt(w.b, n, 10)
	}
	w.b = append(w.b, ']')
}

// appendString appends s as a JSON string. Strings in protobuf messages
// are valid UTF-8 (the decoder checks), so Marshal cannot fail.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}
