// Package filtertest makes random payloads and filters from the whole of
// package filter's grammar, as JSON text, for property tests and fuzzing:
// few keys and values so conditions often hold, missing keys, nulls,
// arrays, integral floats (2020.0), type mismatches, nested objects,
// arrays of objects, datetimes, geo points and nested filters. Filters'
// has_id names ids 0..29 (a test's rows numbered so) and doc-0..doc-599
// (internal/app's corpus). It is for tests only.
package filtertest

import (
	"math/rand/v2"
	"strconv"
	"strings"
)

var (
	strs = []string{"en", "de", "fr", "go", "rust", "x", "",
		// One UUID written three ways, and another: the uuid match
		// operators compare them as UUIDs, the others as strings.
		"6f9619ff-8b86-d011-b42d-00cf4fc964ff", "{6F9619FF-8B86-D011-B42D-00CF4FC964FF}", "6f9619ff8b86d011b42d00cf4fc964ff",
		"123e4567-e89b-12d3-a456-426614174000"}
	uuids = []string{"6F9619FF-8B86-D011-B42D-00CF4FC964FF", "urn:uuid:123e4567-e89b-12d3-a456-426614174000", "0e1d7f5c2b4a4c6e9d3f8a1b2c3d4e5f"}
	ints  = []int64{-1, 0, 1, 2, 3, 2020, 2021, 2024}
	// Keys filters ask about: some never in payloads, some nested, some
	// through a scalar ("lang.x").
	Keys = []string{"lang", "year", "score", "tags", "flag", "title", "meta", "meta.draft", "meta.rank",
		"meta.sub.v", "nope", "lang.x", "meta.nope", "date", "loc", "arr"}
	dates = []string{"2020-01-01T00:00:00Z", "2020-01-01", "2020-01-01 00:00:00.5", "2021-06-15T12:30:00+02:00",
		"2021-06-15T10:30:00Z", "2024-02-29T23:59:59.999999999-0100", "2019-12-31T23:00", "not-a-date"}
	// Keys inside arr's objects.
	innerKeys = []string{"k", "n", "tags", "nope"}
)

// Payload returns a random payload object as JSON text.
func Payload(rng *rand.Rand) string {
	var b strings.Builder
	b.WriteByte('{')
	first := true
	field := func(k string) {
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString(strconv.Quote(k))
		b.WriteByte(':')
	}
	for _, k := range []string{"lang", "year", "score", "tags", "flag", "title"} {
		if rng.IntN(4) == 0 {
			continue
		}
		field(k)
		value(&b, rng, true)
	}
	if rng.IntN(3) > 0 {
		field("meta")
		b.WriteByte('{')
		n := 0
		for _, k := range []string{"draft", "rank", "sub"} {
			if rng.IntN(3) == 0 {
				continue
			}
			if n > 0 {
				b.WriteByte(',')
			}
			n++
			b.WriteString(strconv.Quote(k) + ":")
			if k == "sub" && rng.IntN(2) == 0 {
				b.WriteString(`{"v":`)
				value(&b, rng, true)
				b.WriteByte('}')
				continue
			}
			value(&b, rng, true)
		}
		b.WriteByte('}')
	}
	if rng.IntN(3) > 0 {
		field("date")
		if rng.IntN(4) == 0 {
			b.WriteString("[" + date(rng) + "," + date(rng) + "]")
		} else {
			b.WriteString(date(rng))
		}
	}
	if rng.IntN(3) > 0 {
		field("loc")
		switch rng.IntN(5) {
		case 0:
			b.WriteString("[" + geoPoint(rng) + "," + geoPoint(rng) + "]")
		case 1:
			value(&b, rng, true)
		default:
			b.WriteString(geoPoint(rng))
		}
	}
	if rng.IntN(3) > 0 {
		field("arr")
		if rng.IntN(5) == 0 {
			value(&b, rng, true)
		} else {
			b.WriteByte('[')
			for i := range rng.IntN(4) {
				if i > 0 {
					b.WriteByte(',')
				}
				if rng.IntN(6) == 0 {
					value(&b, rng, false)
					continue
				}
				b.WriteString(`{"k":`)
				value(&b, rng, false)
				b.WriteString(`,"n":`)
				value(&b, rng, false)
				if rng.IntN(2) == 0 {
					b.WriteString(`,"tags":`)
					value(&b, rng, true)
				}
				b.WriteByte('}')
			}
			b.WriteByte(']')
		}
	}
	if rng.IntN(8) == 0 {
		field("a.b") // out of every filter's reach
		value(&b, rng, false)
	}
	b.WriteByte('}')
	return b.String()
}

// date is a datetime payload value, or sometimes a number.
func date(rng *rand.Rand) string {
	if rng.IntN(8) == 0 {
		return "2020"
	}
	return strconv.Quote(dates[rng.IntN(len(dates))])
}

// geoPoint is {"lon", "lat"} on a coarse grid (so points fall on areas'
// edges too), sometimes with an integer or a missing coordinate.
func geoPoint(rng *rand.Rand) string {
	lon := strconv.FormatFloat(float64(rng.IntN(9)-4)*0.5, 'f', 1, 64)
	lat := strconv.Itoa(rng.IntN(5) - 2)
	if rng.IntN(10) == 0 {
		return `{"lat":` + lat + `}`
	}
	return `{"lon":` + lon + `,"lat":` + lat + `}`
}

// value writes a random value: a scalar, or (when arrays) an array of
// them.
func value(b *strings.Builder, rng *rand.Rand, arrays bool) {
	if arrays && rng.IntN(4) == 0 {
		b.WriteByte('[')
		for i := range rng.IntN(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			value(b, rng, false)
		}
		b.WriteByte(']')
		return
	}
	switch rng.IntN(7) {
	case 0:
		b.WriteString("null")
	case 1:
		b.WriteString(strconv.FormatBool(rng.IntN(2) == 0))
	case 2, 3:
		b.WriteString(strconv.Quote(strs[rng.IntN(len(strs))]))
	case 4:
		b.WriteString(strconv.FormatInt(ints[rng.IntN(len(ints))], 10))
	case 5:
		b.WriteString(strconv.FormatInt(ints[rng.IntN(len(ints))], 10) + ".0") // an integral float
	default:
		b.WriteString(strconv.FormatFloat(float64(rng.IntN(50))/10-1, 'f', 1, 64) + "5")
	}
}

// Filter returns a random filter as JSON text, up to depth levels deep.
func Filter(rng *rand.Rand, depth int) string {
	var b strings.Builder
	filterTo(&b, rng, depth)
	return b.String()
}

func filterTo(b *strings.Builder, rng *rand.Rand, depth int) {
	filterKeys(b, rng, depth, Keys, true)
}

// filterKeys writes a filter whose conditions test keys; ids allows
// has_id (a nested filter has none).
func filterKeys(b *strings.Builder, rng *rand.Rand, depth int, keys []string, ids bool) {
	b.WriteByte('{')
	n := 0
	if rng.IntN(6) == 0 {
		n++
		b.WriteString(`"min_should":{"conditions":[`)
		for i := range rng.IntN(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			condition(b, rng, depth, keys, ids)
		}
		b.WriteString(`],"min_count":` + strconv.Itoa(1+rng.IntN(3)) + `}`)
	}
	for _, cl := range []string{"must", "should", "must_not"} {
		if rng.IntN(2) == 0 {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		b.WriteString(strconv.Quote(cl) + ":")
		if rng.IntN(4) == 0 {
			condition(b, rng, depth, keys, ids) // a single condition, not a list
			continue
		}
		b.WriteByte('[')
		for i := range 1 + rng.IntN(3) {
			if i > 0 {
				b.WriteByte(',')
			}
			condition(b, rng, depth, keys, ids)
		}
		b.WriteByte(']')
	}
	b.WriteByte('}')
}

func condition(b *strings.Builder, rng *rand.Rand, depth int, keys []string, ids bool) {
	key := strconv.Quote(keys[rng.IntN(len(keys))])
	op := rng.IntN(18)
	if depth > 1 && rng.IntN(4) == 0 {
		op = -1
	}
	switch op {
	case -1:
		filterKeys(b, rng, depth-1, keys, ids)
	case 10:
		if !ids {
			b.WriteString(`{"is_empty":{"key":` + key + `}}`)
			return
		}
		b.WriteString(`{"has_id":[`)
		for i := range rng.IntN(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			if rng.IntN(2) == 0 {
				b.WriteString(strconv.Itoa(rng.IntN(30)))
			} else {
				b.WriteString(`"doc-` + strconv.Itoa(rng.IntN(600)) + `"`)
			}
		}
		b.WriteString("]}")
	case 11:
		if depth <= 1 {
			b.WriteString(`{"is_null":{"key":` + key + `}}`)
			return
		}
		k := `"arr"`
		if rng.IntN(4) == 0 {
			k = key
		}
		b.WriteString(`{"nested":{"key":` + k + `,"filter":`)
		filterKeys(b, rng, depth-1, innerKeys, false)
		b.WriteString("}}")
	case 12:
		b.WriteString(`{"key":` + key + `,"range":{`)
		bounds := []string{"gt", "gte", "lt", "lte"}
		rng.Shuffle(len(bounds), func(i, j int) { bounds[i], bounds[j] = bounds[j], bounds[i] })
		for i, bd := range bounds[:1+rng.IntN(2)] {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"` + bd + `":` + strconv.Quote(dates[rng.IntN(len(dates)-1)]))
		}
		b.WriteString("}}")
	case 17:
		switch rng.IntN(3) {
		case 0:
			b.WriteString(`{"key":` + key + `,"match":{"uuid":` + strconv.Quote(uuids[rng.IntN(len(uuids))]) + `}}`)
		default:
			b.WriteString(`{"key":` + key + `,"match":{"` + []string{"uuid_any", "uuid_except"}[rng.IntN(2)] + `":[`)
			for i := range rng.IntN(3) {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(strconv.Quote(uuids[rng.IntN(len(uuids))]))
			}
			b.WriteString("]}}")
		}
	case 13:
		op := []string{"text", "phrase", "text_any"}[rng.IntN(3)]
		words := []string{"e", "en", "o", "r", "go rust", " ", "", "x ru"}
		b.WriteString(`{"key":` + key + `,"match":{"` + op + `":` + strconv.Quote(words[rng.IntN(len(words))]) + `}}`)
	case 14:
		center := `{"lon":` + strconv.FormatFloat(float64(rng.IntN(9)-4)*0.5, 'f', 1, 64) + `,"lat":` + strconv.Itoa(rng.IntN(5)-2) + `}`
		b.WriteString(`{"key":` + key + `,"geo_radius":{"center":` + center + `,"radius":` + strconv.Itoa(rng.IntN(300000)) + `}}`)
	case 15:
		lon1, lon2 := float64(rng.IntN(9)-4)*0.5, float64(rng.IntN(9)-4)*0.5
		lat1, lat2 := rng.IntN(5)-2, rng.IntN(5)-2
		b.WriteString(`{"key":` + key + `,"geo_bounding_box":{"top_left":{"lon":` + strconv.FormatFloat(lon1, 'f', 1, 64) +
			`,"lat":` + strconv.Itoa(max(lat1, lat2)) + `},"bottom_right":{"lon":` + strconv.FormatFloat(lon2, 'f', 1, 64) +
			`,"lat":` + strconv.Itoa(min(lat1, lat2)) + `}}}`)
	case 16:
		ring := func(x0, y0, x1, y1 float64) string {
			p := func(x, y float64) string {
				return `{"lon":` + strconv.FormatFloat(x, 'f', -1, 64) + `,"lat":` + strconv.FormatFloat(y, 'f', -1, 64) + `}`
			}
			return `{"points":[` + p(x0, y0) + `,` + p(x1, y0) + `,` + p(x1, y1) + `,` + p(x0, y1) + `,` + p(x0, y0) + `]}`
		}
		b.WriteString(`{"key":` + key + `,"geo_polygon":{"exterior":` + ring(-1.5, -1.5, 1.5, 2))
		if rng.IntN(2) == 0 {
			b.WriteString(`,"interiors":[` + ring(-0.5, -1, 0.5, 1) + `]`)
		}
		b.WriteString("}}")
	case 0, 1:
		b.WriteString(`{"key":` + key + `,"match":{"value":`)
		switch rng.IntN(3) {
		case 0:
			b.WriteString(strconv.Quote(strs[rng.IntN(len(strs))]))
		case 1:
			b.WriteString(strconv.FormatInt(ints[rng.IntN(len(ints))], 10))
		default:
			b.WriteString(strconv.FormatBool(rng.IntN(2) == 0))
		}
		b.WriteString("}}")
	case 2, 3:
		name := "any"
		if op == 3 {
			name = "except"
		}
		b.WriteString(`{"key":` + key + `,"match":{"` + name + `":[`)
		asInts := rng.IntN(2) == 0
		for i := range rng.IntN(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			if asInts {
				b.WriteString(strconv.FormatInt(ints[rng.IntN(len(ints))], 10))
			} else {
				b.WriteString(strconv.Quote(strs[rng.IntN(len(strs))]))
			}
		}
		b.WriteString("]}}")
	case 4, 5:
		b.WriteString(`{"key":` + key + `,"range":{`)
		bounds := []string{"gt", "gte", "lt", "lte"}
		rng.Shuffle(len(bounds), func(i, j int) { bounds[i], bounds[j] = bounds[j], bounds[i] })
		for i, bd := range bounds[:1+rng.IntN(2)] {
			if i > 0 {
				b.WriteByte(',')
			}
			var x string
			if rng.IntN(2) == 0 {
				x = strconv.FormatInt(ints[rng.IntN(len(ints))], 10)
			} else {
				x = strconv.FormatFloat(float64(rng.IntN(50))/10-1, 'f', -1, 64)
			}
			b.WriteString(`"` + bd + `":` + x)
		}
		b.WriteString("}}")
	case 6, 7:
		b.WriteString(`{"is_empty":{"key":` + key + `}}`)
	case 8:
		bounds := []string{"gt", "gte", "lt", "lte"}
		bd := bounds[rng.IntN(len(bounds))]
		b.WriteString(`{"key":` + key + `,"values_count":{"` + bd + `":` + strconv.Itoa(rng.IntN(4)) + `}}`)
	default:
		b.WriteString(`{"is_null":{"key":` + key + `}}`)
	}
}
