package qdrantx

import (
	"fmt"

	"github.com/trawl-search/trawl/api/internal/wire"
)

// CheckKey checks a payload key a read names (facet's key, order_by's
// key): a dotted path a filter could name.
func CheckKey(member, key string) error {
	if key == "" {
		return wire.Invalid(member + " is empty: want a payload key")
	}
	if _, err := HasValue(key); err != nil {
		return wire.Invalid(fmt.Sprintf("%s %q is not a payload key: a key is a dotted path like meta.draft", member, key))
	}
	return nil
}
