package quant

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/trawl-search/trawl/vector"
)

// Kind is how many steps a Scale has.
type Kind uint8

const (
	// PerDimension gives each dimension its own step, from the largest
	// magnitude that dimension takes in the training rows.
	PerDimension Kind = iota + 1
	// PerShard gives every dimension one step, from the largest magnitude
	// of any element.
	PerShard
)

func (k Kind) String() string {
	switch k {
	case PerDimension:
		return "per-dimension"
	case PerShard:
		return "per-shard"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// DefaultKind is the kind a shard should train. Measured (bench/KERNELS.md):
// on isotropic corpora (Gaussian, clustered) the two kinds find the same
// neighbours within noise; on a corpus whose dimensions differ in spread,
// as learned embeddings' do, per-shard wins clearly at low oversample
// (recall@10 0.93 against 0.86 at oversample 1). A per-dimension scale
// makes rows finer but must fold its steps into the query, whose one
// step then follows the widest dimensions twice over (q_d·step_d grows
// with the spread squared), so the narrow dimensions of the query round
// to nothing.
const DefaultKind = PerShard

// MaxCode is the largest code magnitude; codes lie in [-MaxCode, MaxCode].
const MaxCode = 127

// Scale maps float32 elements to int8 codes: element d of a row is
// encoded as round(x/step[d]) clamped to ±MaxCode. A Scale is immutable
// once made (by Train or UnmarshalBinary) and safe to share.
type Scale struct {
	kind Kind
	step []float32
}

// Train returns the Scale of kind for the rows in data (row-major, dim
// floats each), over their finite elements: for PerDimension a step of
// max|x_d|/127 per dimension; for PerShard one step of p/127, where p is
// the largest |x| once the top ClipFraction of all elements is set aside
// (they encode as ±127) and the rest given 25% headroom (up to the plain
// maximum), so one odd row cannot coarsen every code of the shard. A dimension that is zero in every row takes the largest step; an
// all-zero shard a step of 1. The result depends only on the rows, not on
// their order or the machine: maxima and order statistics are exact, and
// each step is one float32 division.
func Train(data []float32, dim int, kind Kind) (Scale, error) {
	return train([][]float32{data}, dim, kind)
}

// TrainRows is Train over the first n rows of rows (every row if n is
// larger), read in place chunk by chunk: a shard's rows are never copied
// into one array to train on.
func TrainRows(rows vector.Rows, n int, kind Kind) (Scale, error) {
	if err := rows.Check(); err != nil {
		return Scale{}, fmt.Errorf("quant: train: %w", err)
	}
	n = min(n, rows.Len())
	var runs [][]float32
	for lo := 0; lo < n; {
		run := rows.Run(lo, n)
		runs = append(runs, run)
		lo += len(run) / rows.Dim
	}
	return train(runs, rows.Dim, kind)
}

// train is Train over the rows of every element of data in turn.
func train(data [][]float32, dim int, kind Kind) (Scale, error) {
	if dim <= 0 || dim > MaxDim {
		return Scale{}, fmt.Errorf("quant: train with dimension %d (want 1..%d)", dim, MaxDim)
	}
	if kind != PerDimension && kind != PerShard {
		return Scale{}, fmt.Errorf("quant: train with %v", kind)
	}
	for _, run := range data {
		if len(run)%dim != 0 {
			return Scale{}, fmt.Errorf("quant: %d floats are not whole %d-D rows", len(run), dim)
		}
	}
	peak := make([]float32, dim)
	for _, run := range data {
		for i := 0; i < len(run); i += dim {
			row := run[i : i+dim : i+dim]
			for d, x := range row {
				a := float32(math.Abs(float64(x)))
				if a > peak[d] && a <= math.MaxFloat32 { // not NaN or Inf
					peak[d] = a
				}
			}
		}
	}
	var all float32
	for _, p := range peak {
		all = max(all, p)
	}
	if kind == PerShard {
		if p := clippedPeak(data) * clipHeadroom; p > 0 && p < all {
			all = p
		}
	}
	if all == 0 {
		all = MaxCode
	}
	step := make([]float32, dim)
	for d, p := range peak {
		if kind == PerShard || p == 0 {
			p = all
		}
		step[d] = p / MaxCode
		if step[d] == 0 { // a peak so small its step underflows
			step[d] = math.SmallestNonzeroFloat32
		}
	}
	return Scale{kind: kind, step: step}, nil
}

// ClipFraction is the share of the largest elements a per-shard scale sets
// aside: one in a million. Over a 1536-D shard of 200 000 rows that is the
// 307 largest of 307 million elements; below a million elements it sets
// none aside and the step is the maximum's. Measured on a clustered
// corpus of 20 000 rows (100 queries) with three rows made spikes (0.99
// in one dimension): the plain maximum made the step five times coarser
// and recall@1 at oversample 4 fell to 0.98 (recall@10 at oversample 1
// from 0.94 to 0.83); setting aside 1e-6 kept every figure at the
// spike-free one. 1e-7 sets aside too few to help there; 1e-5 clamps
// genuine extremes and lost a k=1 neighbour at oversample 4 on the
// clustered test corpus. Without clipHeadroom even 1e-6 clamped genuine
// extremes of the anisotropic bench corpus (recall@1 at oversample 4:
// 0.98, against 1.0 with it).
const ClipFraction = 1e-6

// clipHeadroom is how far above the clipped peak a per-shard step still
// reaches: 1.25 times it, or the maximum if that is lower. Genuine tails
// end close above the clipped peak (a Gaussian's maximum over 10⁸
// elements is 1.14 times its millionth quantile; the anisotropic bench
// corpus's, 1.10) and stay unclamped; a spike five times past it is
// clamped.
const clipHeadroom = 1.25

// clippedPeak returns the ⌊n·ClipFraction⌋+1-th largest |x| of the n finite
// elements of data, or 0 if there are none, by two counting passes over
// the bits of |x| (whose order as integers is their order as floats): the
// top 16 bits find the bucket, the low 16 bits the value. It is exact, so
// every machine gets the same.
func clippedPeak(data [][]float32) float32 {
	const finite = 0x7f800000 // |x| bits at and above are Inf or NaN
	hist := make([]int64, 1<<16)
	var n int64
	for _, run := range data {
		for _, x := range run {
			if b := math.Float32bits(x) &^ (1 << 31); b < finite {
				hist[b>>16]++
				n++
			}
		}
	}
	if n == 0 {
		return 0
	}
	skip := int64(float64(n) * ClipFraction)
	var above int64
	hi := len(hist) - 1
	for ; hi > 0 && above+hist[hi] <= skip; hi-- {
		above += hist[hi]
	}
	clear(hist)
	for _, run := range data {
		for _, x := range run {
			if b := math.Float32bits(x) &^ (1 << 31); b < finite && int(b>>16) == hi {
				hist[b&0xffff]++
			}
		}
	}
	lo := len(hist) - 1
	for ; lo > 0 && above+hist[lo] <= skip; lo-- {
		above += hist[lo]
	}
	return math.Float32frombits(uint32(hi)<<16 | uint32(lo))
}

// Dim is the dimension the Scale encodes, 0 for the zero Scale.
func (s Scale) Dim() int { return len(s.step) }

// Kind is how the Scale was trained.
func (s Scale) Kind() Kind { return s.kind }

// Step returns the step of dimension d: a code c stands for c·Step(d).
func (s Scale) Step(d int) float32 { return s.step[d] }

// Equal reports whether s and o encode every row identically.
func (s Scale) Equal(o Scale) bool {
	if s.kind != o.kind || len(s.step) != len(o.step) {
		return false
	}
	for i, v := range s.step {
		if math.Float32bits(v) != math.Float32bits(o.step[i]) {
			return false
		}
	}
	return true
}

// Encode writes the codes of row to dst; both must have Dim elements.
func (s Scale) Encode(dst []int8, row []float32) {
	if len(row) != len(s.step) || len(dst) != len(s.step) {
		panic(fmt.Sprintf("quant: encode %d floats into %d codes with a %d-D scale", len(row), len(dst), len(s.step)))
	}
	step := s.step[:len(row)]
	dst = dst[:len(row)]
	for d, x := range row {
		dst[d] = code(x / step[d])
	}
}

// code rounds v half away from zero and clamps it to ±MaxCode; NaN is 0.
// Once clamped, |v| + 0.5 is exact in float64 and truncating it rounds
// exactly as math.Round does; the sign goes back on without a branch,
// which random signs would mispredict half the time (encoding runs per
// element of every write, and of every row when codes are rebuilt).
func code(v float32) int8 {
	if v != v {
		return 0
	}
	r := int32(min(math.Abs(float64(v)), MaxCode) + 0.5)
	neg := int32(math.Float32bits(v)) >> 31 // -1 if the sign bit is set, else 0
	return int8(r ^ neg - neg)
}

// encodeQuery writes the codes of query q to dst and returns their unit
// t: q·x ≈ t·Σ dstᵢ·codeᵢ(x). The query is first multiplied by the steps
// (wᵢ = qᵢ·stepᵢ, so the per-dimension steps fold into the query and the
// kernel multiplies codes only), then given its own step
// t = max|w|/QueryMax.
// A zero (or non-finite) query gets all-zero codes and t = 0.
func (s Scale) encodeQuery(dst []int8, q []float32) float32 {
	var peak float32
	for d, x := range q {
		a := float32(math.Abs(float64(x * s.step[d])))
		if a > peak {
			peak = a
		}
	}
	if peak == 0 || peak > math.MaxFloat32 {
		clear(dst)
		return 0
	}
	t := peak / QueryMax
	if t == 0 {
		t = math.SmallestNonzeroFloat32
	}
	for d, x := range q {
		dst[d] = max(-QueryMax, min(QueryMax, code(x*s.step[d]/t)))
	}
	return t
}

// The binary form is a 4-byte magic, the kind, the dimension as a
// little-endian uint32, then each step's float32 bits, little-endian.
var magic = [4]byte{'T', 'Q', '8', '1'}

const headerLen = 4 + 1 + 4

// FromSteps returns the Scale whose step for dimension d is step[d] (a
// backup's steps file): of kind PerShard when every step is the same,
// else PerDimension. Encode depends on the steps alone, so it encodes
// rows exactly as the Scale the steps were read from did.
func FromSteps(step []float32) (Scale, error) {
	if len(step) == 0 || len(step) > MaxDim {
		return Scale{}, fmt.Errorf("quant: %d steps", len(step))
	}
	kind := PerShard
	for d, v := range step {
		if !(v > 0 && v <= math.MaxFloat32) {
			return Scale{}, fmt.Errorf("quant: step %v in dimension %d", v, d)
		}
		if v != step[0] {
			kind = PerDimension
		}
	}
	return Scale{kind: kind, step: append([]float32(nil), step...)}, nil
}

// MarshalBinary encodes the Scale for the consensus log.
func (s Scale) MarshalBinary() ([]byte, error) {
	if len(s.step) == 0 {
		return nil, errors.New("quant: marshal the zero Scale")
	}
	out := make([]byte, headerLen+4*len(s.step))
	copy(out, magic[:])
	out[4] = byte(s.kind)
	binary.LittleEndian.PutUint32(out[5:], uint32(len(s.step)))
	for d, v := range s.step {
		binary.LittleEndian.PutUint32(out[headerLen+4*d:], math.Float32bits(v))
	}
	return out, nil
}

// UnmarshalBinary decodes a Scale written by MarshalBinary, refusing
// anything else: a wrong magic, kind or length, or a step that is not a
// positive finite float.
func (s *Scale) UnmarshalBinary(b []byte) error {
	if len(b) < headerLen || [4]byte(b[:4]) != magic {
		return errors.New("quant: not an encoded Scale")
	}
	kind := Kind(b[4])
	if kind != PerDimension && kind != PerShard {
		return fmt.Errorf("quant: encoded Scale of unknown kind %d", b[4])
	}
	dim := binary.LittleEndian.Uint32(b[5:])
	if dim == 0 || dim > MaxDim || uint64(len(b)-headerLen) != 4*uint64(dim) {
		return fmt.Errorf("quant: encoded Scale of %d dimensions has %d bytes", dim, len(b))
	}
	step := make([]float32, dim)
	for d := range step {
		v := math.Float32frombits(binary.LittleEndian.Uint32(b[headerLen+4*d:]))
		if !(v > 0 && v <= math.MaxFloat32) {
			return fmt.Errorf("quant: encoded Scale has step %v in dimension %d", v, d)
		}
		step[d] = v
	}
	s.kind, s.step = kind, step
	return nil
}
