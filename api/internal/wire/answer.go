package wire

import (
	"math"
	"net/http"
	"strconv"

	"github.com/trawl-search/trawl/coordinator"
	"github.com/trawl-search/trawl/fanout"
)

// Score encodes a float32 with the fewest digits that round-trip, instead
// of the float64 expansion encoding/json would print.
type Score float32

// A dot product of large finite vectors can overflow float32; JSON has no
// Infinity, so such a score saturates at ±MaxFloat32 (it still ranks first
// or last, which is what it means). NaN scores never reach here: top-k drops
// them.
func (s Score) MarshalJSON() ([]byte, error) {
	f := float64(s)
	if math.IsInf(f, 0) {
		f = math.Copysign(math.MaxFloat32, f)
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 32), nil
}

// ShardDetail is one shard's line of ?shard_detail=true.
type ShardDetail struct {
	Shard      string  `json:"shard"`
	Status     string  `json:"status"`
	Replica    string  `json:"replica"`
	LatencyMS  float64 `json:"latency_ms"`
	Hedged     bool    `json:"hedged"`
	FailedOver bool    `json:"failed_over"`
}

// ScatterGather is the block every answer that read shards carries, in
// both dialects (DESIGN.md, "Query path").
type ScatterGather struct {
	Degraded          bool              `json:"degraded"`
	ShardsTotal       int               `json:"shards_total"`
	ShardsQueried     int               `json:"shards_queried"`
	UnavailableShards []string          `json:"unavailable_shards"`
	ShardErrors       map[string]string `json:"shard_errors"`
	Coverage          float64           `json:"coverage"`
	Exact             bool              `json:"exact"`
	ElapsedMS         int64             `json:"elapsed_ms"`
	DeadlineMS        int64             `json:"deadline_ms"`
	ShardDeadlineMS   int64             `json:"shard_deadline_ms"`
	Shards            []ShardDetail     `json:"shards,omitempty"`
}

// NewScatterGather is an answer's block; detail adds the per-shard lines.
func NewScatterGather(ans coordinator.Answer, detail bool) ScatterGather {
	sum := ans.Summary
	sg := ScatterGather{
		Degraded:          sum.Degraded(),
		ShardsTotal:       sum.ShardsTotal,
		ShardsQueried:     sum.ShardsQueried,
		UnavailableShards: sum.Unavailable,
		ShardErrors:       make(map[string]string, len(sum.ShardErrors)),
		Coverage:          sum.Coverage,
		Exact:             ans.Exact,
		ElapsedMS:         sum.Elapsed.Milliseconds(),
		DeadlineMS:        sum.Deadline.Milliseconds(),
		ShardDeadlineMS:   sum.ShardDeadline.Milliseconds(),
	}
	for name, reason := range sum.ShardErrors {
		sg.ShardErrors[name] = string(reason)
	}
	if detail {
		sg.Shards = make([]ShardDetail, len(ans.Shards))
		for i, r := range ans.Shards {
			sg.Shards[i] = ShardDetail{Shard: r.Shard, Status: r.Status, Replica: r.Replica,
				LatencyMS: float64(r.Latency.Microseconds()) / 1000, Hedged: r.Hedged, FailedOver: r.FailedOver}
		}
	}
	return sg
}

// Late reports whether a fan-out ran out of time: a shard missed its
// deadline, or the whole answer took longer than the deadline. The
// admission limiter learns from it.
//
// A shard refusing as overloaded is not counted late: it refuses in
// microseconds, and at 4x capacity counting it collapsed the limit until no
// complete answer got through for half a second (make test-overload failed
// 3 of 3; 2 of 2 passed without it). The query itself is refused with 429.
func Late(sum fanout.Summary) bool {
	for _, reason := range sum.ShardErrors {
		if reason == fanout.ReasonDeadline {
			return true
		}
	}
	return sum.Deadline > 0 && sum.Elapsed > sum.Deadline
}

// SetDegraded puts the fan-out's verdict in X-Trawl-Degraded, so proxies
// and clients that never read the body still see a partial answer.
func SetDegraded(w http.ResponseWriter, sg ScatterGather) {
	w.Header().Set("X-Trawl-Degraded", strconv.FormatBool(sg.Degraded))
}
