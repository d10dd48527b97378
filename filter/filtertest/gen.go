// Package filtertest makes random payloads and filters from the whole of
// package filter's grammar, as JSON text, for property tests and fuzzing:
// few keys and values so conditions often hold, missing keys, nulls,
// arrays, integral floats (2020.0), type mismatches, nested objects and
// nested filters. It is for tests only.
package filtertest

import (
	"math/rand/v2"
	"strconv"
	"strings"
)

var (
	strs = []string{"en", "de", "fr", "go", "rust", "x", ""}
	ints = []int64{-1, 0, 1, 2, 3, 2020, 2021, 2024}
	// Keys filters ask about: some never in payloads, some nested, some
	// through a scalar ("lang.x").
	Keys = []string{"lang", "year", "score", "tags", "flag", "title", "meta", "meta.draft", "meta.rank",
		"meta.sub.v", "nope", "lang.x", "meta.nope"}
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
	if rng.IntN(8) == 0 {
		field("a.b") // out of every filter's reach
		value(&b, rng, false)
	}
	b.WriteByte('}')
	return b.String()
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
	b.WriteByte('{')
	n := 0
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
			condition(b, rng, depth) // a single condition, not a list
			continue
		}
		b.WriteByte('[')
		for i := range 1 + rng.IntN(3) {
			if i > 0 {
				b.WriteByte(',')
			}
			condition(b, rng, depth)
		}
		b.WriteByte(']')
	}
	b.WriteByte('}')
}

func condition(b *strings.Builder, rng *rand.Rand, depth int) {
	key := strconv.Quote(Keys[rng.IntN(len(Keys))])
	op := rng.IntN(10)
	if depth > 1 && rng.IntN(4) == 0 {
		op = -1
	}
	switch op {
	case -1:
		filterTo(b, rng, depth-1)
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
