package qdrantgrpc

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

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
// has_id's point ids are written as the trawl ids they name, a
// DatetimeRange's timestamps as RFC 3339 bounds of a range (REST's
// spelling of a datetime range). Conditions outside trawl's subset
// (has_vector) are written under their JSON names, which filter refuses
// by name. Nil is no filter.
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
	if ms := f.MinShould; ms != nil {
		if !first {
			w.b = append(w.b, ',')
		}
		w.b = append(w.b, `"min_should":{"conditions":[`...)
		for i, c := range ms.GetConditions() {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			if err := w.condition(c, fmt.Sprintf("%s.min_should.conditions[%d]", where, i), level); err != nil {
				return err
			}
		}
		w.b = append(w.b, `],"min_count":`...)
		w.b = strconv.AppendUint(w.b, ms.GetMinCount(), 10)
		w.b = append(w.b, '}')
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
		w.b = append(w.b, `{"has_id":[`...)
		for i, p := range x.HasId.GetHasId() {
			id, err := decodeID(p, fmt.Sprintf("%s.has_id[%d]", where, i))
			if err != nil {
				return err
			}
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = appendString(w.b, id)
		}
		w.b = append(w.b, "]}"...)
	case *pb.Condition_Nested:
		w.b = append(w.b, `{"nested":{"key":`...)
		w.b = appendString(w.b, x.Nested.GetKey())
		if inner := x.Nested.GetFilter(); inner != nil {
			w.b = append(w.b, `,"filter":`...)
			if err := w.filter(inner, where+".nested.filter", level+1); err != nil {
				return err
			}
		}
		w.b = append(w.b, "}}"...)
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
	if r := fc.DatetimeRange; r != nil {
		if fc.Range != nil {
			return wire.Invalid(where + ": has range and datetime_range; give one")
		}
		w.b = append(w.b, `,"range":{`...)
		n := 0
		for _, b := range []struct {
			name string
			t    *timestamppb.Timestamp
		}{{"gt", r.Gt}, {"gte", r.Gte}, {"lt", r.Lt}, {"lte", r.Lte}} {
			if b.t == nil {
				continue
			}
			if b.t.CheckValid() != nil {
				// protobuf's own message varies its spacing on purpose.
				return wire.Invalid(fmt.Sprintf("%s.datetime_range.%s: is not a valid timestamp: want seconds within years 1 to 9999 and nanos within 0 to 999999999", where, b.name))
			}
			if n > 0 {
				w.b = append(w.b, ',')
			}
			n++
			w.b = append(w.b, '"')
			w.b = append(w.b, b.name...)
			w.b = append(w.b, `":`...)
			w.b = appendString(w.b, b.t.AsTime().Format(time.RFC3339Nano))
		}
		w.b = append(w.b, '}')
	}
	if g := fc.GeoRadius; g != nil {
		w.b = append(w.b, `,"geo_radius":{`...)
		if err := w.geoPoint("center", g.Center, where+".geo_radius"); err != nil {
			return err
		}
		if err := finite(float64(g.Radius), where+".geo_radius.radius"); err != nil {
			return err
		}
		w.b = append(w.b, `,"radius":`...)
		w.b = strconv.AppendFloat(w.b, float64(g.Radius), 'g', -1, 64)
		w.b = append(w.b, '}')
	}
	if g := fc.GeoBoundingBox; g != nil {
		w.b = append(w.b, `,"geo_bounding_box":{`...)
		if err := w.geoPoint("top_left", g.TopLeft, where+".geo_bounding_box"); err != nil {
			return err
		}
		w.b = append(w.b, ',')
		if err := w.geoPoint("bottom_right", g.BottomRight, where+".geo_bounding_box"); err != nil {
			return err
		}
		w.b = append(w.b, '}')
	}
	if g := fc.GeoPolygon; g != nil {
		w.b = append(w.b, `,"geo_polygon":{`...)
		if err := w.ring("exterior", g.Exterior, where+".geo_polygon"); err != nil {
			return err
		}
		if len(g.Interiors) > 0 {
			w.b = append(w.b, `,"interiors":[`...)
			for i, r := range g.Interiors {
				if i > 0 {
					w.b = append(w.b, ',')
				}
				if err := w.ring("", r, fmt.Sprintf("%s.geo_polygon.interiors[%d]", where, i)); err != nil {
					return err
				}
			}
			w.b = append(w.b, ']')
		}
		w.b = append(w.b, '}')
	}
	for _, o := range []struct {
		set  bool
		name string
	}{{fc.IsEmpty != nil, "is_empty"}, {fc.IsNull != nil, "is_null"}} {
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
		w.b = append(w.b, `{"text":`...)
		w.b = appendString(w.b, x.Text)
	case *pb.Match_Phrase:
		w.b = append(w.b, `{"phrase":`...)
		w.b = appendString(w.b, x.Phrase)
	case *pb.Match_TextAny:
		w.b = append(w.b, `{"text_any":`...)
		w.b = appendString(w.b, x.TextAny)
	default:
		return wire.Invalid(where + ": is empty; give one of keyword, integer, boolean, keywords, integers, except_keywords, except_integers, text, phrase or text_any")
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

// geoPoint writes {"lon","lat"}, as "name": when named; a nil point as
// null, which the filter refuses naming the member.
func (w *filterWriter) geoPoint(name string, p *pb.GeoPoint, where string) error {
	if name != "" {
		w.b = append(w.b, '"')
		w.b = append(w.b, name...)
		w.b = append(w.b, `":`...)
	}
	if p == nil {
		w.b = append(w.b, "null"...)
		return nil
	}
	for _, c := range []struct {
		name string
		v    float64
	}{{"lon", p.Lon}, {"lat", p.Lat}} {
		if err := finite(c.v, where+"."+name+"."+c.name); err != nil {
			return err
		}
	}
	w.b = append(w.b, `{"lon":`...)
	w.b = strconv.AppendFloat(w.b, p.Lon, 'g', -1, 64)
	w.b = append(w.b, `,"lat":`...)
	w.b = strconv.AppendFloat(w.b, p.Lat, 'g', -1, 64)
	w.b = append(w.b, '}')
	return nil
}

// ring writes a GeoLineString as {"points": [...]}, as "name": when
// named.
func (w *filterWriter) ring(name string, r *pb.GeoLineString, where string) error {
	if name != "" {
		w.b = append(w.b, '"')
		w.b = append(w.b, name...)
		w.b = append(w.b, `":`...)
		where += "." + name
	}
	w.b = append(w.b, `{"points":[`...)
	for i, p := range r.GetPoints() {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		if p == nil {
			return wire.Invalid(fmt.Sprintf("%s.points[%d]: is missing", where, i))
		}
		if err := w.geoPoint("", p, fmt.Sprintf("%s.points[%d]", where, i)); err != nil {
			return err
		}
	}
	w.b = append(w.b, "]}"...)
	return nil
}

func finite(x float64, where string) error {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return wire.Invalid(fmt.Sprintf("%s: is %v, want a finite number", where, x))
	}
	return nil
}
