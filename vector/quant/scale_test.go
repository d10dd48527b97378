package quant

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/trawl-search/trawl/vector"
)

func TestTrain(t *testing.T) {
	data := []float32{
		1, -4, 0, 0.5,
		-2, 3, 0, float32(math.NaN()),
		0.5, 1, 0, float32(math.Inf(-1)),
	}
	for _, c := range []struct {
		kind Kind
		want []float32
	}{
		{PerDimension, []float32{2.0 / 127, 4.0 / 127, 4.0 / 127, 0.5 / 127}},
		{PerShard, []float32{4.0 / 127, 4.0 / 127, 4.0 / 127, 4.0 / 127}},
	} {
		s, err := Train(data, 4, c.kind)
		require.NoError(t, err)
		require.Equal(t, 4, s.Dim())
		require.Equal(t, c.kind, s.Kind())
		for d, w := range c.want {
			require.Equal(t, w, s.Step(d), "%v dim %d", c.kind, d)
		}
	}
	zero, err := Train(make([]float32, 6), 3, PerDimension)
	require.NoError(t, err)
	require.Equal(t, float32(1), zero.Step(0))
	empty, err := Train(nil, 3, PerShard)
	require.NoError(t, err)
	require.Equal(t, 3, empty.Dim())

	for _, bad := range []struct {
		data []float32
		dim  int
		kind Kind
	}{{data, 0, PerShard}, {data, 5, PerShard}, {data, 4, 0}, {data, 4, 9}, {nil, MaxDim + 1, PerShard}} {
		_, err := Train(bad.data, bad.dim, bad.kind)
		require.Error(t, err, "%+v", bad)
	}
}

// TestTrainDeterministic: the order of the rows never changes a Scale,
// bit for bit, so a leader and a replica that trains again agree.
func TestTrainDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 62))
	const n, dim = 500, 37
	data := make([]float32, n*dim)
	for i := range data {
		data[i] = float32(r.NormFloat64())
	}
	perm := make([]float32, 0, len(data))
	for _, i := range r.Perm(n) {
		perm = append(perm, data[i*dim:(i+1)*dim]...)
	}
	for _, kind := range []Kind{PerDimension, PerShard} {
		a, err := Train(data, dim, kind)
		require.NoError(t, err)
		b, err := Train(perm, dim, kind)
		require.NoError(t, err)
		require.True(t, a.Equal(b), kind.String())
		ab, _ := a.MarshalBinary()
		bb, _ := b.MarshalBinary()
		require.Equal(t, ab, bb)
	}
}

func TestScaleBinary(t *testing.T) {
	s, err := Train([]float32{1, -2, 3, 0.25, 5, -6}, 3, PerDimension)
	require.NoError(t, err)
	b, err := s.MarshalBinary()
	require.NoError(t, err)
	require.Len(t, b, headerLen+4*3)
	var got Scale
	require.NoError(t, got.UnmarshalBinary(b))
	require.True(t, s.Equal(got))
	require.False(t, s.Equal(Scale{}))

	_, err = Scale{}.MarshalBinary()
	require.Error(t, err)
	bad := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), b...)) }
	for name, in := range map[string][]byte{
		"empty":     nil,
		"magic":     bad(func(b []byte) []byte { b[0] = 'X'; return b }),
		"kind":      bad(func(b []byte) []byte { b[4] = 7; return b }),
		"short":     b[:len(b)-1],
		"long":      append(bad(func(b []byte) []byte { return b }), 0),
		"zero dim":  bad(func(b []byte) []byte { return append(b[:5], 0, 0, 0, 0) }),
		"zero step": bad(func(b []byte) []byte { copy(b[headerLen:], []byte{0, 0, 0, 0}); return b }),
		"nan step":  bad(func(b []byte) []byte { copy(b[headerLen:], []byte{0, 0, 0xc0, 0x7f}); return b }),
		"neg step":  bad(func(b []byte) []byte { b[headerLen+3] |= 0x80; return b }),
	} {
		var s Scale
		require.Error(t, s.UnmarshalBinary(in), name)
		require.Zero(t, s.Dim(), name)
	}
}

func TestEncode(t *testing.T) {
	s, err := Train([]float32{1.27, -1.27}, 2, PerDimension) // steps 0.01
	require.NoError(t, err)
	dst := make([]int8, 2)
	for _, c := range []struct {
		in   [2]float32
		want [2]int8
	}{
		{[2]float32{0.5, -0.5}, [2]int8{50, -50}},
		{[2]float32{0.004, -0.006}, [2]int8{0, -1}},
		{[2]float32{1.27, -1.27}, [2]int8{127, -127}},
		{[2]float32{100, -100}, [2]int8{127, -127}}, // clamped, never -128
		{[2]float32{float32(math.Inf(1)), float32(math.Inf(-1))}, [2]int8{127, -127}},
		{[2]float32{float32(math.NaN()), 0}, [2]int8{0, 0}},
	} {
		s.Encode(dst, c.in[:])
		require.Equal(t, c.want[:], dst, "%v", c.in)
	}
	require.Panics(t, func() { s.Encode(dst, []float32{1}) })
}

func TestEncodeQuery(t *testing.T) {
	s, err := Train([]float32{1, 2, -1, -2}, 2, PerDimension) // steps 1/127, 2/127
	require.NoError(t, err)
	dst := make([]int8, 2)
	u := s.encodeQuery(dst, []float32{1, 0.5})
	// w = (1/127, 1/127): both the largest, so both QueryMax.
	require.Equal(t, []int8{QueryMax, QueryMax}, dst)
	require.Equal(t, float32(1.0/127)/QueryMax, u)
	s.encodeQuery(dst, []float32{-1, 0.25})
	require.Equal(t, []int8{-QueryMax, 32}, dst) // 31.5 rounds away from zero
	require.Zero(t, s.encodeQuery(dst, []float32{0, 0}))
	require.Equal(t, []int8{0, 0}, dst)
	require.Zero(t, s.encodeQuery(dst, []float32{float32(math.Inf(1)), 0}))
}

// TestCodesMirrorRows applies a random mix of appends, overwrites and
// swap-deletes to float rows (the way the shard's arena does) and to
// codes: the codes must always equal a fresh encoding of the rows.
func TestCodesMirrorRows(t *testing.T) {
	r := rand.New(rand.NewPCG(63, 64))
	const dim = 70
	vec := func() []float32 {
		v := make([]float32, dim)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	var train []float32
	for range 50 {
		train = append(train, vec()...)
	}
	s, err := Train(train, dim, PerDimension)
	require.NoError(t, err)
	c := NewCodes(s)
	var rows []float32
	for step := range 3000 {
		n := len(rows) / dim
		switch op := r.IntN(10); {
		case op < 6 || n == 0:
			v := vec()
			rows = append(rows, v...)
			c.Append(v)
		case op < 8:
			i, v := r.IntN(n), vec()
			copy(rows[i*dim:], v)
			c.Set(i, v)
		default:
			i := r.IntN(n)
			copy(rows[i*dim:(i+1)*dim], rows[(n-1)*dim:])
			rows = rows[:(n-1)*dim]
			c.Delete(i)
		}
		if step%100 == 0 || step == 2999 {
			want, err := Encode(s, vector.FlatRows(rows, dim, make([]string, len(rows)/dim)))
			require.NoError(t, err)
			require.Equal(t, want.Len(), c.Len())
			require.Equal(t, allCodes(want), allCodes(c), "step %d", step)
			require.Equal(t, want.norms, c.norms, "step %d", step)
		}
	}
	require.NotZero(t, c.Len())
	require.Equal(t, dim, len(c.Row(0)))
	require.Panics(t, func() { c.Delete(c.Len()) })
	require.Panics(t, func() { NewCodes(Scale{}) })
	_, err = Encode(s, vector.FlatRows(rows, dim+1, nil))
	require.Error(t, err)
	require.Greater(t, c.Bytes(), c.Len()*dim)
}

func TestCodesAligned(t *testing.T) {
	s, _ := Train(make([]float32, 1536), 1536, PerShard)
	c := NewCodes(s)
	for range 3000 { // past the first growth
		c.Append(make([]float32, 1536))
	}
	for i := 0; i < c.Len(); i += c.codes.ChunkRows() {
		require.Zero(t, uintptr(unsafePointer(c.Row(i)))%vector.Alignment)
	}
}

// TestCodeRounds checks the fast rounding against math.Round on random
// values, every half step and the values next to them.
func TestCodeRounds(t *testing.T) {
	ref := func(v float32) int8 {
		if v != v {
			return 0
		}
		return int8(math.Max(-MaxCode, math.Min(MaxCode, math.Round(float64(v)))))
	}
	r := rand.New(rand.NewPCG(65, 66))
	var vs []float32
	for h := -260; h <= 260; h++ {
		v := float32(h) / 2
		vs = append(vs, v, math.Nextafter32(v, 1000), math.Nextafter32(v, -1000))
	}
	for range 100000 {
		vs = append(vs, float32(r.NormFloat64()*80))
	}
	vs = append(vs, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)))
	for _, v := range vs {
		require.Equal(t, ref(v), code(v), "%v", v)
	}
}

// TestTrainClips: a per-shard step sets aside the top ClipFraction of the
// elements, exactly, whatever their order; a per-dimension one does not.
func TestTrainClips(t *testing.T) {
	r := rand.New(rand.NewPCG(67, 68))
	const n, dim = 1000, 3100 // 3.1 million elements: the 3 largest are set aside
	data := make([]float32, n*dim)
	for i := range data {
		data[i] = float32(r.NormFloat64() * 0.01)
	}
	data[5], data[77777] = 9, -8
	data[200000] = 7
	sorted := make([]float64, 0, len(data))
	for _, x := range data {
		if x == x {
			sorted = append(sorted, math.Abs(float64(x)))
		}
	}
	slices.Sort(sorted)
	skip := int(float64(len(sorted)) * ClipFraction)
	want := float32(sorted[len(sorted)-1-skip])
	require.Less(t, want, float32(1))
	s, err := Train(data, dim, PerShard)
	require.NoError(t, err)
	require.Equal(t, want*clipHeadroom/MaxCode, s.Step(0))
	require.Equal(t, want*clipHeadroom/MaxCode, s.Step(dim-1))
	require.Equal(t, want, clippedPeak([][]float32{data}))
	d, err := Train(data, dim, PerDimension)
	require.NoError(t, err)
	require.Equal(t, float32(9.0/MaxCode), d.Step(5))
	// A tail that ends within the headroom keeps the plain maximum.
	data[5], data[77777], data[200000] = 0.055, 0.05, 0.05
	s, err = Train(data, dim, PerShard)
	require.NoError(t, err)
	require.Equal(t, float32(0.055)/MaxCode, s.Step(0))
	// Few elements: nothing set aside.
	require.Equal(t, float32(9), clippedPeak([][]float32{{1, -9}, {3, float32(math.Inf(1))}}))
	require.Zero(t, clippedPeak([][]float32{{float32(math.NaN())}}))
	require.Zero(t, clippedPeak(nil))
}

// TestEncodeParallel: Encode split across goroutines builds exactly what
// appending row by row builds.
func TestEncodeParallel(t *testing.T) {
	r := rand.New(rand.NewPCG(69, 70))
	rows := gaussian(r, 3*minEncodeRows+17, 40, false)
	s, err := TrainRows(rows, rows.Len(), DefaultKind)
	require.NoError(t, err)
	got, err := Encode(s, rows)
	require.NoError(t, err)
	want := NewCodes(s)
	for i := range rows.Len() {
		want.Append(rows.Row(i))
	}
	require.Equal(t, want.Len(), got.Len())
	require.Equal(t, allCodes(want), allCodes(got))
	require.Equal(t, want.norms, got.norms)
	require.Equal(t, want.sums, got.sums)
	got.Append(rows.Row(0)) // the arena still grows in place
	require.Equal(t, rows.Len()+1, got.Len())
}
