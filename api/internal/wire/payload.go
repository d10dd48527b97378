package wire

import (
	"encoding/json"

	"github.com/trawl-search/trawl/filter"
)

// ParseFilter parses an optional filter member (Qdrant's filter JSON in
// both dialects); nil when absent.
func ParseFilter(raw json.RawMessage) (*filter.Filter, error) {
	if !IsSet(raw) {
		return nil, nil
	}
	f, err := filter.Parse(raw)
	if err != nil {
		return nil, Invalid(err.Error())
	}
	return f, nil
}

// CheckPayload checks an optional payload member and returns it as a
// shard stores it; nil when absent. Its error is plain: callers say
// which entry it was.
func CheckPayload(raw json.RawMessage) ([]byte, error) {
	if !IsSet(raw) {
		return nil, nil
	}
	return filter.CheckPayload(raw)
}
