package ivf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/trawl-search/trawl/vector"
)

// MaxLists bounds the number of inverted lists: √N lists for N up to four
// billion rows, far past what one shard holds.
const MaxLists = 65536

// Centroids are the trained centres of the inverted lists: plain data,
// serialised with MarshalBinary for the consensus log. List i's centre is
// Data[i*Dim:(i+1)*Dim].
type Centroids struct {
	// Metric is the metric they were trained for; it decides how rows are
	// assigned and lists probed (see Index).
	Metric vector.Metric
	Dim    int
	Data   []float32
	// TrainedRows is how many rows the shard held when they were trained,
	// for NeedsRetrain.
	TrainedRows int
}

// Lists is the number of lists.
func (c Centroids) Lists() int {
	if c.Dim <= 0 {
		return 0
	}
	return len(c.Data) / c.Dim
}

// Centre returns list i's centre; it aliases Data.
func (c Centroids) Centre(i int) []float32 { return c.Data[i*c.Dim : (i+1)*c.Dim : (i+1)*c.Dim] }

// validate checks what every use of the centroids relies on.
func (c Centroids) validate() error {
	if c.Metric != vector.Cosine && c.Metric != vector.DotProduct && c.Metric != vector.Euclidean {
		return fmt.Errorf("ivf: centroids for %v", c.Metric)
	}
	if c.Dim <= 0 || len(c.Data)%c.Dim != 0 {
		return fmt.Errorf("ivf: %d floats are not whole %d-D centroids", len(c.Data), c.Dim)
	}
	if n := c.Lists(); n < 1 || n > MaxLists {
		return fmt.Errorf("ivf: %d centroids, want 1..%d", n, MaxLists)
	}
	for i, v := range c.Data {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("ivf: centroid %d has %v in dimension %d", i/c.Dim, v, i%c.Dim)
		}
	}
	if c.TrainedRows < 0 {
		return fmt.Errorf("ivf: centroids trained on %d rows", c.TrainedRows)
	}
	return nil
}

// Equal reports whether c and o assign every vector identically (same
// metric, dimension and centre bits).
func (c Centroids) Equal(o Centroids) bool {
	if c.Metric != o.Metric || c.Dim != o.Dim || c.TrainedRows != o.TrainedRows || len(c.Data) != len(o.Data) {
		return false
	}
	for i, v := range c.Data {
		if math.Float32bits(v) != math.Float32bits(o.Data[i]) {
			return false
		}
	}
	return true
}

// The binary form: a 4-byte magic, the metric, the dimension and the list
// count as little-endian uint32, the trained row count as a little-endian
// uint64, then each centre's float32 bits, little-endian.
var magic = [4]byte{'T', 'I', 'V', '1'}

const headerLen = 4 + 1 + 4 + 4 + 8

// MarshalBinary encodes the centroids for the consensus log.
func (c Centroids) MarshalBinary() ([]byte, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	out := make([]byte, headerLen+4*len(c.Data))
	copy(out, magic[:])
	out[4] = byte(c.Metric)
	binary.LittleEndian.PutUint32(out[5:], uint32(c.Dim))
	binary.LittleEndian.PutUint32(out[9:], uint32(c.Lists()))
	binary.LittleEndian.PutUint64(out[13:], uint64(c.TrainedRows))
	for i, v := range c.Data {
		binary.LittleEndian.PutUint32(out[headerLen+4*i:], math.Float32bits(v))
	}
	return out, nil
}

// UnmarshalBinary decodes centroids written by MarshalBinary, refusing
// anything else (wrong magic or length, unknown metric, a non-finite
// centre).
func (c *Centroids) UnmarshalBinary(b []byte) error {
	if len(b) < headerLen || [4]byte(b[:4]) != magic {
		return errors.New("ivf: not encoded centroids")
	}
	dim := binary.LittleEndian.Uint32(b[5:])
	lists := binary.LittleEndian.Uint32(b[9:])
	rows := binary.LittleEndian.Uint64(b[13:])
	if dim == 0 || dim > math.MaxInt32 || lists == 0 || lists > MaxLists || rows > math.MaxInt32 ||
		uint64(len(b)-headerLen) != 4*uint64(dim)*uint64(lists) {
		return fmt.Errorf("ivf: encoded centroids (%d of %d-D) have %d bytes", lists, dim, len(b))
	}
	data := make([]float32, int(dim)*int(lists))
	for i := range data {
		data[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[headerLen+4*i:]))
	}
	out := Centroids{Metric: vector.Metric(b[4]), Dim: int(dim), Data: data, TrainedRows: int(rows)}
	if err := out.validate(); err != nil {
		return err
	}
	*c = out
	return nil
}

// coarse chooses lists for vectors: the nearest list of a row
// (assignment) and the nprobe nearest of a query (probing), by keys where
// larger is better:
//
//	key_j(v) = v·c_j − w·|c_j|²/2
//
// With w = 1 that is −|v − c_j|²/2 plus a constant of v: nearest by L2.
// Rows are assigned by L2 for dot and l2, whose k-means minimises it, and
// by the dot product for cosine (unit rows and unit centres: the same
// order). Queries probe by L2 for l2 and by the dot product for cosine and
// dot, the score they rank rows by.
//
// The choice must be the same on every replica whatever its kernel, so
// it is decided by keys summed in float64 in a fixed order (products of
// float32 are exact in float64, so fusing them into multiply-adds changes
// nothing), ties to the lower list id. Scoring every centre that way
// would cost ~2 µs per centre; instead the SIMD kernel scores them all
// (its dot products are within γₙ·|v|·|c| of the exact ones whatever its
// order of summation, γₙ = n·2⁻²⁴/(1 − n·2⁻²⁴)), and only the centres whose
// fast key is within twice that bound of the n-th best are re-scored in
// float64. Every centre that can be in the float64 top n is among them,
// so the answer is the float64 top n: a pure function of the centroids
// and the vector.
type coarse struct {
	c     Centroids
	half  []float64 // |c_j|²/2, float64 sums of exact products
	cmax  float64   // max |c_j|
	hmax  float64   // max half
	lists int
}

func newCoarse(c Centroids) *coarse {
	co := &coarse{c: c, lists: c.Lists(), half: make([]float64, c.Lists())}
	for j := range co.lists {
		h := dot64(c.Centre(j), c.Centre(j)) / 2
		co.half[j] = h
		co.hmax = max(co.hmax, h)
	}
	co.cmax = math.Sqrt(2 * co.hmax)
	return co
}

// margin is how far below the n-th best fast key a centre's fast key may
// fall and still be in the float64 top n, for a vector of norm vn: twice
// the float32 kernel's error bound, plus the float64 sums' own (also
// relative to |v|·|c|) and the roundings of the subtraction, with half
// again to spare.
func (co *coarse) margin(vn float64) float64 {
	n := float64(co.c.Dim)
	g32 := n * 0x1p-24 / (1 - n*0x1p-24)
	g64 := n * 0x1p-53 / (1 - n*0x1p-53)
	vc := vn * co.cmax
	return 1.5 * (2*(g32+g64)*vc + 4*0x1p-53*(vc+co.hmax))
}

// nearest appends to dst the n lists with the best keys for v (ties to the
// lower id), in ascending id order; w selects the key (see coarse). fast
// holds the float32 kernel's v·c_j for every list. cand is scratch.
func (co *coarse) nearest(dst []int32, fast []float32, v []float32, n int, w float64, cand []candidate) ([]int32, []candidate) {
	if n >= co.lists {
		for j := range co.lists {
			dst = append(dst, int32(j))
		}
		return dst, cand
	}
	// The n-th best fast key: the threshold for re-scoring.
	cand = cand[:0]
	finite := true
	for j, d := range fast[:co.lists] {
		k := float64(d) - w*co.half[j]
		if math.IsNaN(k) || math.IsInf(k, 0) {
			finite = false
		}
		cand = append(cand, candidate{list: int32(j), key: k})
	}
	var th float64
	if finite {
		if n == 1 {
			th = cand[0].key
			for _, c := range cand[1:] {
				th = max(th, c.key)
			}
		} else {
			th = nthLargest(cand, n)
		}
		th -= co.margin(norm64(v))
	}
	// Re-score in float64 every centre that may be in the top n (all of
	// them if a fast key overflowed).
	keep := cand[:0]
	for _, c := range cand {
		if !finite || c.key >= th {
			c.key = dot64(v, co.c.Centre(int(c.list))) - w*co.half[c.list]
			keep = append(keep, c)
		}
	}
	slices.SortFunc(keep, func(a, b candidate) int {
		switch {
		case a.key > b.key:
			return -1
		case a.key < b.key:
			return 1
		}
		return int(a.list - b.list)
	})
	start := len(dst)
	for _, c := range keep[:min(n, len(keep))] {
		dst = append(dst, c.list)
	}
	slices.Sort(dst[start:])
	return dst, cand
}

// candidate is a list and its key.
type candidate struct {
	list int32
	key  float64
}

// nthLargest returns the n-th largest key of cs (1 ≤ n ≤ len(cs)) without
// reordering cs: a bounded min-heap of the n best keys.
func nthLargest(cs []candidate, n int) float64 {
	h := make([]float64, 0, n)
	for _, c := range cs {
		if len(h) < n {
			h = append(h, c.key)
			for i := len(h) - 1; i > 0; {
				p := (i - 1) / 2
				if h[p] <= h[i] {
					break
				}
				h[p], h[i] = h[i], h[p]
				i = p
			}
			continue
		}
		if c.key <= h[0] {
			continue
		}
		h[0] = c.key
		for i := 0; ; {
			l, s := 2*i+1, i
			if l < n && h[l] < h[s] {
				s = l
			}
			if r := l + 1; r < n && h[r] < h[s] {
				s = r
			}
			if s == i {
				break
			}
			h[s], h[i] = h[i], h[s]
			i = s
		}
	}
	return h[0]
}

// dot64 is Σ aᵢbᵢ in float64, four sums in a fixed order: every product of
// two float32 is exact in float64, so the result does not depend on
// whether the compiler fuses multiply-adds, and is the same everywhere.
func dot64(a, b []float32) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		x, y := a[i:i+4:i+4], b[i:i+4:i+4]
		s0 += float64(x[0]) * float64(y[0])
		s1 += float64(x[1]) * float64(y[1])
		s2 += float64(x[2]) * float64(y[2])
		s3 += float64(x[3]) * float64(y[3])
	}
	for ; i < len(a); i++ {
		s0 += float64(a[i]) * float64(b[i])
	}
	return (s0 + s1) + (s2 + s3)
}

func norm64(v []float32) float64 { return math.Sqrt(dot64(v, v)) }
