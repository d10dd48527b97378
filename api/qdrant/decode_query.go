package qdrant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/coordinator"
)

// prefetchJSON is Qdrant's Prefetch: a QueryRequest's members that a
// stage of the tree may have (no offset, payload or vector selection:
// those belong to the answer, the root's alone).
type prefetchJSON struct {
	Prefetch       json.RawMessage `json:"prefetch"`
	Query          json.RawMessage `json:"query"`
	Using          *string         `json:"using"`
	Filter         json.RawMessage `json:"filter"`
	Params         *searchParams   `json:"params"`
	ScoreThreshold *float64        `json:"score_threshold"`
	Limit          *int            `json:"limit"`
	LookupFrom     json.RawMessage `json:"lookup_from"`
}

// fusionStage decodes what a fusion stage reads of its members: its
// limit, filter and threshold (on the fused score); lookup_from and a
// named vector are refused as decodeQuery refuses them.
func fusionStage(shardKey, lookupFrom json.RawMessage, using *string, limit, offset *int, f, wp, wv json.RawMessage, params *searchParams, threshold *float64) (query, error) {
	if err := refuseSet(shardKey, errShardKey); err != nil {
		return query{}, err
	}
	if err := refuseSet(lookupFrom, "lookup_from is not supported: a query by id looks the point up in the collection it searches"); err != nil {
		return query{}, err
	}
	if using != nil && *using != "" {
		return query{}, wire.Invalid(fmt.Sprintf("using: %s (got %q)", errNamedVectors, *using))
	}
	return decodeCommon(limit, offset, DefaultLimit, f, wp, wv, params, threshold)
}

// fusionQuery reads a query member that is a fusion — {"fusion": "rrf"},
// {"fusion": "dbsf"} or {"rrf": {"k", "weights"}} — and reports false for
// any other query (a vector, an id, nearest, recommend, ...).
func fusionQuery(name string, raw json.RawMessage) (*coordinator.Fusion, bool, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || len(obj) != 1 {
		return nil, false, nil
	}
	if f, ok := obj["fusion"]; ok {
		var method string
		if err := json.Unmarshal(f, &method); err != nil {
			return nil, true, wire.Invalid(fmt.Sprintf(`%s.fusion: want "rrf" or "dbsf"`, name))
		}
		switch method {
		case "rrf":
			return &coordinator.Fusion{Method: coordinator.FusionRRF}, true, nil
		case "dbsf":
			return &coordinator.Fusion{Method: coordinator.FusionDBSF}, true, nil
		}
		return nil, true, wire.Invalid(fmt.Sprintf(`%s.fusion: unknown variant %q, want "rrf" or "dbsf"`, name, method))
	}
	if r, ok := obj["rrf"]; ok {
		var p struct {
			K       *int      `json:"k"`
			Weights []float32 `json:"weights"`
		}
		if err := wire.DecodeStrict(r, &p); err != nil {
			return nil, true, wire.Invalid(fmt.Sprintf("%s.rrf: %v", name, err))
		}
		out := &coordinator.Fusion{Method: coordinator.FusionRRF, Weights: p.Weights}
		if p.K != nil {
			if *p.K < 1 {
				return nil, true, wire.Invalid(fmt.Sprintf("%s.rrf.k is %d, want at least 1", name, *p.K))
			}
			out.K = *p.K
		}
		return out, true, nil
	}
	return nil, false, nil
}

// decodeQueryTree reads a QueryRequest with prefetch, or with a fusion
// query (which needs one): the root stage and its prefetches, nested as
// Qdrant nests them. Everything but the tree is decoded as decodeQuery
// decodes a plain query, so a stage means what the same members mean
// there.
func decodeQueryTree(b []byte, sch coordinator.Schema) (query, error) {
	var req queryJSON
	if err := wire.DecodeStrict(b, &req); err != nil {
		return query{}, err
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		return query{}, wire.Invalid("bad JSON: " + err.Error())
	}
	dropMember(members, "prefetch")
	f, isFusion, err := fusionQuery("query", req.Query.raw)
	if err != nil {
		return query{}, err
	}
	var out query
	if isFusion {
		out, err = fusionStage(req.ShardKey, req.LookupFrom, req.Using, req.Limit, req.Offset, req.Filter, req.WithPayload, req.WithVector, req.Params, req.ScoreThreshold)
	} else {
		out, err = decodeQueryStage(members, sch)
	}
	if err != nil {
		return query{}, err
	}
	root := coordinator.Stage{Query: out.q, Fusion: f}
	if root.Prefetch, err = decodePrefetches("prefetch", req.Prefetch, sch, 1); err != nil {
		return query{}, err
	}
	if f != nil && len(root.Prefetch) == 0 {
		return query{}, wire.Invalid("query.fusion needs prefetch: a fusion fuses the results of prefetches")
	}
	out.tree = &root
	return out, nil
}

// dropMember deletes name from members as encoding/json matches it:
// regardless of case, so no spelling of it is left for a second decode
// to find.
func dropMember(members map[string]json.RawMessage, name string) {
	for k := range members {
		if strings.EqualFold(k, name) {
			delete(members, k)
		}
	}
}

// decodeQueryStage decodes one stage's members (no prefetch) as
// points/query decodes a request.
func decodeQueryStage(members map[string]json.RawMessage, sch coordinator.Schema) (query, error) {
	rest, err := json.Marshal(members)
	if err != nil {
		return query{}, wire.Invalid("bad JSON: " + err.Error())
	}
	return decodeQuery(rest, sch)
}

// decodePrefetches reads a prefetch member: one Prefetch or a list of
// them (Qdrant accepts both), each named by its place.
func decodePrefetches(name string, raw json.RawMessage, sch coordinator.Schema, depth int) ([]coordinator.Stage, error) {
	raw = bytes.TrimSpace(raw)
	if !wire.IsSet(raw) {
		return nil, nil
	}
	if depth > coordinator.MaxPrefetchDepth {
		return nil, wire.Invalid(fmt.Sprintf("%s: prefetches nest deeper than %d", name, coordinator.MaxPrefetchDepth))
	}
	var list []json.RawMessage
	single := raw[0] == '{'
	if single {
		list = []json.RawMessage{raw}
	} else if err := json.Unmarshal(raw, &list); err != nil {
		return nil, wire.Invalid(fmt.Sprintf("%s: want a prefetch object or a list of them", name))
	}
	out := make([]coordinator.Stage, len(list))
	for i, r := range list {
		at := name
		if !single {
			at = fmt.Sprintf("%s[%d]", name, i)
		}
		st, err := decodePrefetch(at, r, sch, depth)
		if err != nil {
			return nil, err
		}
		out[i] = st
	}
	return out, nil
}

// decodePrefetch reads one Prefetch named at.
func decodePrefetch(at string, raw json.RawMessage, sch coordinator.Schema, depth int) (coordinator.Stage, error) {
	var p prefetchJSON
	if err := wire.DecodeStrict(raw, &p); err != nil {
		return coordinator.Stage{}, wire.Invalid(fmt.Sprintf("%s: %v", at, err))
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return coordinator.Stage{}, wire.Invalid(fmt.Sprintf("%s: bad JSON: %v", at, err))
	}
	dropMember(members, "prefetch")
	st := coordinator.Stage{Name: at}
	var err error
	if st.Prefetch, err = decodePrefetches(at+".prefetch", p.Prefetch, sch, depth+1); err != nil {
		return coordinator.Stage{}, err
	}
	if !wire.IsSet(p.Query) && len(st.Prefetch) > 0 {
		return coordinator.Stage{}, wire.Invalid(fmt.Sprintf("%s.query is missing: a prefetch with prefetches needs a query (a fusion or a vector to re-score them with)", at))
	}
	f, isFusion, err := fusionQuery(at+".query", p.Query)
	if err != nil {
		return coordinator.Stage{}, err
	}
	var q query
	switch {
	case isFusion && len(st.Prefetch) == 0:
		return coordinator.Stage{}, wire.Invalid(fmt.Sprintf("%s.query.fusion needs prefetch: a fusion fuses the results of prefetches", at))
	case isFusion:
		q, err = fusionStage(nil, p.LookupFrom, p.Using, p.Limit, nil, p.Filter, nil, nil, p.Params, p.ScoreThreshold)
	default:
		q, err = decodeQueryStage(members, sch)
	}
	if err != nil {
		return coordinator.Stage{}, wire.Invalid(fmt.Sprintf("%s: %v", at, err))
	}
	st.Query, st.Fusion = q.q, f
	return st, nil
}
