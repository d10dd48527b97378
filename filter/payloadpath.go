package filter

import (
	"fmt"
	"strings"
)

// PayloadPath splits set_payload's key, a dotted path of object
// members ("meta.source"), into its segments. Empty is the top level.
// Array indexes ("a[0].b", "a[].b") are refused: trawl sets payload under
// object members only.
func PayloadPath(key string) ([]string, error) {
	if key == "" {
		return nil, nil
	}
	if strings.ContainsAny(key, `[]"`) {
		return nil, fmt.Errorf("key %q: trawl sets payload under a dotted path of object members; array indexes and quoted segments are not supported", key)
	}
	segs := strings.Split(key, ".")
	for _, s := range segs {
		if s == "" {
			return nil, fmt.Errorf("key %q has an empty segment", key)
		}
	}
	if len(segs) >= MaxDepth {
		return nil, fmt.Errorf("key %q is %d levels deep; a payload nests at most %d", key, len(segs), MaxDepth)
	}
	return segs, nil
}
