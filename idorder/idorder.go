// Package idorder is the order trawl lists document ids in (scroll pages,
// Qdrant's points/scroll): ids that are canonical unsigned decimal integers
// first, by value, then every other id bytewise. It is Qdrant's order for
// the ids Qdrant clients write — integers before UUIDs, integers
// numerically, and UUIDs by value, which for their canonical lowercase
// hyphenated form is bytewise — extended to trawl's free-form ids.
//
// Shards sort their pages by it and the router merges pages by it, so both
// must use this one definition.
package idorder

import "strings"

// Uint reports whether id is a canonical unsigned decimal integer (digits
// only, no sign, no leading zero except "0" itself, at most 2^64-1) and its
// value. "007" and "+7" are not: they are ordinary ids.
func Uint(id string) (uint64, bool) {
	if id == "" || len(id) > 20 || (len(id) > 1 && id[0] == '0') {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (1<<64-1-d)/10 {
			return 0, false // over 2^64-1
		}
		n = n*10 + d
	}
	return n, true
}

// Compare orders two ids: -1 if a comes first, 0 if equal, +1 if b does.
func Compare(a, b string) int {
	an, aok := Uint(a)
	bn, bok := Uint(b)
	switch {
	case aok && bok:
		switch {
		case an < bn:
			return -1
		case an > bn:
			return 1
		}
		return 0
	case aok:
		return -1
	case bok:
		return 1
	}
	return strings.Compare(a, b)
}
