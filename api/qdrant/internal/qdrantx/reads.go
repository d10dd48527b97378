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

// CheckRecommendStrategy accepts Qdrant's average_vector strategy and
// refuses the others by name: best_score and sum_scores score each point
// against every example, which trawl's scans do not do.
func CheckRecommendStrategy(member, strategy string) error {
	switch strategy {
	case "average_vector":
		return nil
	case "best_score", "sum_scores":
		return wire.Invalid(fmt.Sprintf("%s %s is not supported: trawl recommends with average_vector (one search with 2·avg(positive) − avg(negative))", member, strategy))
	}
	return wire.Invalid(fmt.Sprintf("%s is %q, want average_vector (best_score and sum_scores are not supported)", member, strategy))
}
