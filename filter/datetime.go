package filter

import (
	"errors"
	"strings"
	"time"
)

// TimeRange bounds instants; a nil bound is absent, and at least one is
// set. Bounds are in UTC.
type TimeRange struct {
	GT, GTE, LT, LTE *time.Time
}

type timeBound struct {
	name string
	t    *time.Time
}

func (r TimeRange) bounds() [4]timeBound {
	return [4]timeBound{{"gt", r.GT}, {"gte", r.GTE}, {"lt", r.LT}, {"lte", r.LTE}}
}

// Contains reports whether t is within every bound.
func (r TimeRange) Contains(t time.Time) bool {
	return (r.GT == nil || t.After(*r.GT)) && (r.GTE == nil || !t.Before(*r.GTE)) &&
		(r.LT == nil || t.Before(*r.LT)) && (r.LTE == nil || !t.After(*r.LTE))
}

// datetimeLayouts are the forms Qdrant reads a datetime in, after
// ParseDatetime has written the date-time separator as T and a zone
// designator as Z: RFC 3339 (any fraction of a second), offsets as
// +hh:mm, +hhmm or +hh, and without a zone (UTC) to the second, to the
// minute or a date alone.
var datetimeLayouts = [...]string{
	"2006-01-02T15:04:05Z07:00",
	"2006-01-02T15:04:05-0700",
	"2006-01-02T15:04:05-07",
	"2006-01-02T15:04:05",
	"2006-01-02T15:04",
	"2006-01-02",
}

var errDatetime = errors.New("is not a datetime; want RFC 3339 like 2014-01-01T00:00:00Z (or without zone, UTC)")

// ParseDatetime reads a datetime as Qdrant's datetime range and payload
// do: RFC 3339 with T, t or a space between date and time and Z or z
// for UTC; an offset of +hh:mm, +hhmm or +hh (also after a space); no
// zone at all, read as UTC, with or without seconds; or a date alone,
// its midnight UTC. The instant is returned in UTC.
func ParseDatetime(s string) (time.Time, error) {
	if len(s) < 10 || len(s) > 64 {
		return time.Time{}, errDatetime
	}
	if len(s) > 10 {
		switch s[10] {
		case 't', ' ':
			s = s[:10] + "T" + s[11:]
		}
	}
	if strings.HasSuffix(s, "z") {
		s = s[:len(s)-1] + "Z"
	}
	// "2014-11-28 21:00:09 +09:00": the offset may follow a space.
	if i := strings.LastIndexByte(s, ' '); i > 10 && i+1 < len(s) && (s[i+1] == '+' || s[i+1] == '-' || s[i+1] == 'Z') {
		s = s[:i] + s[i+1:]
	}
	for _, l := range datetimeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, errDatetime
}
