package quant

import (
	"fmt"
	"os"
	"strings"
	"unsafe"

	"github.com/trawl-search/trawl/vector"
	"github.com/trawl-search/trawl/vector/internal/racerange"
)

// Kernel is one implementation of the int8 code primitives. Every kernel
// computes the same exact integers, so which one runs changes speed only,
// never a candidate set.
type Kernel struct {
	// Name is "generic" or "avx2".
	Name string
	// Dot returns Σ aᵢbᵢ over min(len(a), len(b)) elements, exactly.
	// Elements must lie in [-127, 127] (every code does); the sum fits
	// int32 for any length up to 133 000.
	Dot func(a, b []int8) int32

	// tile, when set, scores one or two queries against four rows per
	// call; without it ScoreRows goes pair by pair.
	tile *tiler
}

// MaxDim is the longest row the int32 sums hold without overflow:
// 127·127·MaxDim < 2³¹.
const MaxDim = 133_000

// Generic is the portable Go kernel, available everywhere.
func Generic() Kernel { return Kernel{Name: "generic", Dot: dotGeneric} }

// Available lists the kernels this CPU can run, best last.
func Available() []Kernel {
	return append([]Kernel{Generic()}, platformKernels()...)
}

// Select returns the kernel called name ("" means the best available), or
// an error naming the kernels this machine can run.
func Select(name string) (Kernel, error) {
	avail := Available()
	if name == "" {
		return avail[len(avail)-1], nil
	}
	names := make([]string, 0, len(avail))
	for _, k := range avail {
		if k.Name == name {
			return k, nil
		}
		names = append(names, k.Name)
	}
	return Kernel{}, fmt.Errorf("quant kernel %q not available on this CPU (have %s)", name, strings.Join(names, ", "))
}

// FromEnv follows vector.EnvKernel (TRAWL_VECTOR_KERNEL) so one setting
// forces both scans: the int8 kernel of that name, "generic" for
// "generic", and the best int8 kernel for a name with no int8 twin (such
// as "avx512" here, which has no int8 kernel of its own).
func FromEnv() Kernel {
	name := os.Getenv(vector.EnvKernel)
	if k, err := Select(name); err == nil {
		return k
	}
	k, _ := Select("")
	return k
}

// The generic kernel keeps four sums so consecutive multiply-adds do not
// wait on each other; integer sums are exact in any order. Like the
// float32 ones it is built //go:norace and reports its reads once per
// call (racerange).
//
//go:norace
func dotGeneric(a, b []int8) int32 {
	n := min(len(a), len(b))
	a, b = a[:n], b[:n]
	racerange.Read(a)
	racerange.Read(b)
	var s0, s1, s2, s3 int32
	i := 0
	for ; i+8 <= n; i += 8 {
		x, y := a[i:i+8:i+8], b[i:i+8:i+8]
		s0 += int32(x[0])*int32(y[0]) + int32(x[4])*int32(y[4])
		s1 += int32(x[1])*int32(y[1]) + int32(x[5])*int32(y[5])
		s2 += int32(x[2])*int32(y[2]) + int32(x[6])*int32(y[6])
		s3 += int32(x[3])*int32(y[3]) + int32(x[7])*int32(y[7])
	}
	for ; i < n; i++ {
		s0 += int32(a[i]) * int32(b[i])
	}
	return s0 + s1 + s2 + s3
}

// QueryMax is the largest magnitude of a query code. Queries get one bit
// less than rows so that the AVX2 tile can offset them into unsigned
// bytes (e + 64 ≤ 127) and multiply them by the rows' signed codes with
// no sign fix-up per pair; see kernel_amd64.s.
const QueryMax = 63

// queryOffset is what the tile adds to each query code.
const queryOffset = 64

// ScoreRows writes the dot product of query i and row j of codes
// (row-major, dim codes each) to out[i*n+j], n = len(codes)/dim. Every
// query must have dim codes in [-QueryMax, QueryMax] (as the scan encodes
// them; rows may use all of [-127, 127]), and out room for
// len(queries)*n sums.
func (k Kernel) ScoreRows(queries [][]int8, codes []int8, dim int, out []int32) {
	if dim <= 0 || dim > MaxDim {
		panic(fmt.Sprintf("quant: ScoreRows with dimension %d", dim))
	}
	n := len(codes) / dim
	if len(out) < len(queries)*n {
		panic(fmt.Sprintf("quant: ScoreRows needs %d sums, out has %d", len(queries)*n, len(out)))
	}
	for i, q := range queries {
		if len(q) != dim {
			panic(fmt.Sprintf("quant: ScoreRows query %d has %d codes, want %d", i, len(q), dim))
		}
	}
	b := k.prepare(queries, dim)
	var sums []int32
	if b.offset != nil {
		sums = make([]int32, n)
		for j := range n {
			sums[j] = codeSum(codes[j*dim : (j+1)*dim])
		}
	}
	k.score(b, codes, sums, dim, out)
}

// batch is a set of encoded queries as the kernels take them: the codes,
// and, for a kernel with a two-query tile, the codes offset into unsigned
// bytes.
type batch struct {
	codes  [][]int8
	offset [][]uint8
}

// prepare makes the batch for queries; it allocates once per scan.
func (k Kernel) prepare(queries [][]int8, dim int) batch {
	b := batch{codes: queries}
	if k.tile == nil || len(queries) < 2 || dim < tileStep {
		return b
	}
	buf := make([]uint8, len(queries)*dim)
	b.offset = make([][]uint8, len(queries))
	for i, q := range queries {
		u := buf[i*dim : (i+1)*dim : (i+1)*dim]
		for d, e := range q {
			u[d] = uint8(e + queryOffset)
		}
		b.offset[i] = u
	}
	return b
}

// codeSum is Σ codes, which the offset tile subtracts 64 times.
func codeSum(codes []int8) int32 {
	var s int32
	for _, c := range codes {
		s += int32(c)
	}
	return s
}

// score is ScoreRows on a prepared batch; sums holds each row's codeSum
// when b has offset queries.
func (k Kernel) score(b batch, codes []int8, sums []int32, dim int, out []int32) {
	n := len(codes) / dim
	if k.tile == nil || dim < tileStep {
		for j := range n {
			row := codes[j*dim : (j+1)*dim]
			for i, q := range b.codes {
				out[i*n+j] = k.dotOr(q, row)
			}
		}
		return
	}
	k.scoreTiles(b, codes, sums, dim, n, out)
}

func (k Kernel) dotOr(a, b []int8) int32 {
	if k.Dot == nil {
		return dotGeneric(a, b)
	}
	return k.Dot(a, b)
}

// tileStep is the bytes the tile kernels take per step; they score the
// first dim rounded down to a multiple of it, and Go adds the rest (sums
// of integers are exact in any order, so the split changes nothing).
const tileStep = 32

// scoreTiles walks the rows four at a time, and each group of four with
// every pair of queries, so a row is read from memory once per batch. A
// lone query walks the rows one by one: one sequential stream, which the
// hardware prefetcher follows at full speed.
func (k Kernel) scoreTiles(b batch, codes []int8, sums []int32, dim, n int, out []int32) {
	t := k.tile
	body := dim &^ (tileStep - 1)
	queries := b.codes
	nq := len(queries)
	if nq == 1 {
		q := queries[0]
		for j := range n {
			row := codes[j*dim : (j+1)*dim]
			s := t.single(&q[0], &row[0], body)
			if body < dim {
				s += dotGeneric(q[body:], row[body:])
			}
			out[j] = s
		}
		return
	}
	pairs := nq &^ 1
	var (
		rp [4]*int8
		up [2]*uint8
		o4 [4]int32
		o8 [8]int32
	)
	base := uintptr(unsafe.Pointer(&codes[0]))
	for j0 := 0; j0 < n; j0 += 4 {
		// A short last group repeats its last row; those sums are dropped.
		cnt := min(4, n-j0)
		for j := range 4 {
			rp[j] = &codes[(j0+min(j, cnt-1))*dim]
		}
		// Every two-query tile prefetches the group pfGroups ahead (4·body
		// bytes, nearly all of its 4·dim), past the end of codes too: the
		// next block usually follows in memory. Lines already fetched by
		// the group's first tile are cache hits for the rest.
		pf := base + uintptr((j0+4*pfGroups)*dim)
		for i0 := 0; i0 < pairs; i0 += 2 {
			up[0], up[1] = &b.offset[i0][0], &b.offset[i0+1][0]
			t.two(&up, &rp, body, &o8, pf)
			for i := range 2 {
				u := b.offset[i0+i]
				o := out[(i0+i)*n+j0 : (i0+i)*n+j0+cnt]
				for j := range cnt {
					s := o8[i*4+j]
					if body < dim {
						s += dotOffset(u[body:], codes[(j0+j)*dim+body:(j0+j+1)*dim])
					}
					o[j] = s - queryOffset*sums[j0+j]
				}
			}
		}
		if pairs < nq {
			q := queries[nq-1]
			t.one(&q[0], &rp, body, &o4)
			o := out[(nq-1)*n+j0 : (nq-1)*n+j0+cnt]
			for j := range cnt {
				s := o4[j]
				if body < dim {
					s += dotGeneric(q[body:], codes[(j0+j)*dim+body:(j0+j+1)*dim])
				}
				o[j] = s
			}
		}
	}
}

// pfGroups is how many groups of four rows ahead the two-query tiles
// prefetch. Without it each group's first tile stalls on memory: four
// row streams are more than the hardware prefetcher runs ahead on. A
// batch-32 scan of 65 536 rows on one core took 48.1 ms with it and 56.3
// without (medians of six interleaved runs, Zen 3).
const pfGroups = 2

// dotOffset is Σ uᵢcᵢ for offset query bytes u, the tile's tail in Go.
func dotOffset(u []uint8, c []int8) int32 {
	var s int32
	for i, x := range u[:len(c)] {
		s += int32(x) * int32(c[i])
	}
	return s
}
