package vector

import (
	"fmt"
	"log/slog"
	"math"
)

// Metric is how a cluster scores a query against a stored vector.
type Metric uint8

const (
	// Cosine is the dot product of unit vectors; vectors are normalised on
	// write, so a scan scores it with Dot. Higher is better.
	Cosine Metric = iota
	// DotProduct is the raw inner product. Higher is better.
	DotProduct
	// Euclidean is the L2 distance. Lower is better.
	Euclidean
)

// ParseMetric maps the flag and API spelling ("cosine", "dot", "l2").
func ParseMetric(s string) (Metric, error) {
	switch s {
	case "cosine":
		return Cosine, nil
	case "dot":
		return DotProduct, nil
	case "l2":
		return Euclidean, nil
	}
	return 0, fmt.Errorf("unknown metric %q (want cosine, dot or l2)", s)
}

func (m Metric) String() string {
	switch m {
	case Cosine:
		return "cosine"
	case DotProduct:
		return "dot"
	case Euclidean:
		return "l2"
	}
	return fmt.Sprintf("Metric(%d)", uint8(m))
}

// LogValue logs the metric by name ("cosine"), not by number.
func (m Metric) LogValue() slog.Value { return slog.StringValue(m.String()) }

// Hit is one scored document.
type Hit struct {
	ID    string
	Score float32
}

// Better reports whether a ranks before b: the better score first (higher,
// or lower for Euclidean), ties broken by id ascending. A NaN score ranks
// after every real one so it can never displace a real hit.
func (m Metric) Better(a, b Hit) bool {
	ka, kb := m.key(a.Score), m.key(b.Score)
	if ka != kb {
		return ka > kb
	}
	return a.ID < b.ID
}

// key maps a score to an order where larger is always better and NaN is
// the worst value of all.
func (m Metric) key(s float32) float32 {
	if s != s {
		return float32(math.Inf(-1))
	}
	if m == Euclidean {
		return -s
	}
	return s
}

// Contract limits shared by every layer that checks a query.
const (
	// DefaultDim is the dimension assumed until the shards report theirs,
	// and a shard's default --dim.
	DefaultDim = 1536
	// MaxK is the largest k a search may ask for.
	MaxK = 1000
)
