package vector

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

// A metric in a log line reads as its name: operators grep for "cosine",
// not for 0.
func TestMetricLogsByName(t *testing.T) {
	for _, m := range []Metric{Cosine, DotProduct, Euclidean} {
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("schema", "metric", m)
		require.Contains(t, buf.String(), `"metric":"`+m.String()+`"`)
	}
}
