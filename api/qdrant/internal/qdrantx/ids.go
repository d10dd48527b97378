package qdrantx

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/idorder"
)

// Qdrant point ids are unsigned 64-bit integers or UUIDs. trawl ids are
// strings, so a Qdrant id is stored under its canonical string: an
// integer in decimal without leading zeros ("42"), a UUID lowercase and
// hyphenated ("550e8400-e29b-41d4-a716-446655440000") whichever of the
// forms Qdrant accepts it came in (hyphenated, 32 hex digits, braced,
// urn:uuid:; any case).
//
// Any other string (1..256 bytes) is taken as the trawl id it is, so
// documents written through /v1 with ids such as "doc-7" can be read,
// queried by, scrolled past and deleted through the Qdrant API too
// (Qdrant itself refuses such ids; no Qdrant client sends them
// unprompted). A string that is a canonical unsigned integer ("42") is
// refused: that id is the number 42, and answers would give it back as a
// number.
//
// Going back, an id that is a canonical unsigned integer (IsNum) is
// answered as a number and every other id as a string. So a client gets
// back the type it sent — integers as numbers, UUIDs as strings — and a
// document written through /v1 with an id such as "doc-7" reads back as
// that string.

// NumID is the trawl id of the integer id n.
func NumID(n uint64) string { return strconv.FormatUint(n, 10) }

// ParseUint takes the decimal text of an id that must be an unsigned
// 64-bit integer: 7, not 7.0, 7e0 or -7.
func ParseUint(s string) (string, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return "", fmt.Errorf("id %s is not an unsigned 64-bit integer", s)
	}
	return NumID(n), nil
}

// StringID maps an id given as a string: a UUID to its canonical form,
// any other string but a canonical integer to itself.
func StringID(s string) (string, error) {
	if u, ok := CanonicalUUID(s); ok {
		return u, nil
	}
	if _, ok := idorder.Uint(s); ok {
		return "", fmt.Errorf("id %q is a string; an integer id is sent as a number (%s)", s, s)
	}
	if err := wire.CheckID(s); err != nil {
		return "", err
	}
	return s, nil
}

// IsNum reports whether a trawl id is a canonical unsigned integer,
// answered as a number, and which.
func IsNum(id string) (uint64, bool) { return idorder.Uint(id) }

// CanonicalUUID accepts the UUID forms Qdrant does and returns the
// lowercase hyphenated one.
func CanonicalUUID(s string) (string, bool) {
	switch {
	case len(s) == 45 && strings.EqualFold(s[:9], "urn:uuid:"):
		s = s[9:]
	case len(s) == 38 && s[0] == '{' && s[37] == '}':
		s = s[1:37]
	}
	var hexs string
	switch len(s) {
	case 32:
		hexs = s
	case 36:
		if s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
			return "", false
		}
		hexs = s[:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	default:
		return "", false
	}
	var b [16]byte
	if _, err := hex.Decode(b[:], []byte(hexs)); err != nil {
		return "", false
	}
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], true
}
