package qdrant

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/trawl-search/trawl/api/internal/wire"
	"github.com/trawl-search/trawl/api/qdrant/internal/qdrantx"
	"github.com/trawl-search/trawl/coordinator"
)

// recommendJSON is Qdrant's RecommendInput (query's {"recommend": ...})
// and the examples of its legacy RecommendRequest.
type recommendJSON struct {
	Positive []json.RawMessage `json:"positive"`
	Negative []json.RawMessage `json:"negative"`
	Strategy *string           `json:"strategy"`
}

// decode checks the strategy and reads the examples: point ids or
// vectors, each named by its place (where.positive[2]).
func (rj recommendJSON) decode(where string, sch coordinator.Schema) (*coordinator.Recommend, error) {
	if rj.Strategy != nil {
		if err := qdrantx.CheckRecommendStrategy(where+".strategy", *rj.Strategy); err != nil {
			return nil, err
		}
	}
	out := &coordinator.Recommend{}
	var err error
	if out.Positive, err = decodeExamples(rj.Positive, where+".positive", sch); err != nil {
		return nil, err
	}
	if out.Negative, err = decodeExamples(rj.Negative, where+".negative", sch); err != nil {
		return nil, err
	}
	if len(out.Positive) == 0 {
		return nil, wire.Invalid(where + ".positive is empty: the average_vector strategy needs at least one positive example")
	}
	if n := len(out.Positive) + len(out.Negative); n > coordinator.MaxExamples {
		return nil, wire.Invalid(fmt.Sprintf("%s has %d examples, want at most %d", where, n, coordinator.MaxExamples))
	}
	return out, nil
}

func decodeExamples(raws []json.RawMessage, where string, sch coordinator.Schema) ([]coordinator.Example, error) {
	out := make([]coordinator.Example, len(raws))
	for i, raw := range raws {
		at := fmt.Sprintf("%s[%d]", where, i)
		raw = bytes.TrimSpace(raw)
		if len(raw) > 0 && raw[0] == '[' || len(raw) > 0 && raw[0] == '{' {
			var jv jsonVector
			if err := json.Unmarshal(raw, &jv); err != nil {
				return nil, wire.Invalid(at + ": " + err.Error())
			}
			v, err := decodeVector(jv, at, sch)
			if err != nil {
				return nil, err
			}
			out[i].Vector = v
			continue
		}
		id, err := parseID(raw)
		if err != nil {
			return nil, wire.Invalid(at + ": " + err.Error())
		}
		out[i].ID = id
	}
	return out, nil
}

// recommendRequestJSON is Qdrant's legacy RecommendRequest
// (points/recommend).
type recommendRequestJSON struct {
	recommendJSON
	ShardKey       json.RawMessage `json:"shard_key"`
	Filter         json.RawMessage `json:"filter"`
	Params         *searchParams   `json:"params"`
	Limit          *int            `json:"limit"`
	Offset         *int            `json:"offset"`
	WithPayload    json.RawMessage `json:"with_payload"`
	WithVector     json.RawMessage `json:"with_vector"`
	ScoreThreshold *float64        `json:"score_threshold"`
	Using          *string         `json:"using"`
	LookupFrom     json.RawMessage `json:"lookup_from"`
}

func decodeRecommend(b []byte, sch coordinator.Schema) (query, error) {
	var req recommendRequestJSON
	if err := wire.DecodeStrict(b, &req); err != nil {
		return query{}, err
	}
	if err := refuseSet(req.ShardKey, errShardKey); err != nil {
		return query{}, err
	}
	if err := refuseSet(req.LookupFrom, qdrantx.ErrLookupFrom); err != nil {
		return query{}, err
	}
	if req.Using != nil && *req.Using != "" {
		return query{}, wire.Invalid(fmt.Sprintf("using: %s (got %q)", errNamedVectors, *req.Using))
	}
	if req.Limit == nil {
		return query{}, wire.Invalid(`missing "limit"`)
	}
	out, err := decodeCommon(req.Limit, req.Offset, DefaultLimit, req.Filter, req.WithPayload, req.WithVector, req.Params, req.ScoreThreshold)
	if err != nil {
		return query{}, err
	}
	if out.q.Recommend, err = req.recommendJSON.decode("recommend", sch); err != nil {
		return query{}, err
	}
	return out, nil
}
