package qdrantgrpc

import (
	"testing"

	"github.com/stretchr/testify/require"

	pb "github.com/trawl-search/trawl/api/qdrant/qdrantpb"
	"github.com/trawl-search/trawl/catalog"
)

// TestCreateOnDisk: vectors_config.params.on_disk places the float32 rows;
// absent, the collection's default for its quantization applies.
func TestCreateOnDisk(t *testing.T) {
	yes, no := true, false
	int8q := &pb.QuantizationConfig{Quantization: &pb.QuantizationConfig_Scalar{Scalar: &pb.ScalarQuantization{Type: pb.QuantizationType_Int8}}}
	for _, tc := range []struct {
		name   string
		onDisk *bool
		quant  *pb.QuantizationConfig
		want   string
	}{
		{"float32 default", nil, nil, catalog.Float32InMemory},
		{"int8 default", nil, int8q, catalog.Float32OnDisk},
		{"float32 on disk", &yes, nil, catalog.Float32OnDisk},
		{"int8 in memory", &no, int8q, catalog.Float32InMemory},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &pb.CreateCollection{CollectionName: "c", QuantizationConfig: tc.quant, VectorsConfig: &pb.VectorsConfig{
				Config: &pb.VectorsConfig_Params{Params: &pb.VectorParams{Size: 8, Distance: pb.Distance_Dot, OnDisk: tc.onDisk}}}}
			s, err := decodeCreate(req)
			require.NoError(t, err)
			require.Equal(t, tc.want, s.Normalize().Float32)
		})
	}
}
