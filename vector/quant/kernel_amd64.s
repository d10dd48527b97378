//go:build !purego

#include "textflag.h"

// AVX2 int8 dot products. There is no signed-by-signed byte multiply, so
// each step makes one side unsigned: VPABSB takes |a| and VPSIGNB gives b
// a's sign, then VPMADDUBSW multiplies |a| (unsigned) by ±b (signed) and
// adds adjacent products into int16 lanes (at most 2·127·127 = 32 258,
// so it never saturates for codes in [-127, 127]), and VPMADDWD by ones
// widens adjacent int16 pairs into the int32 accumulators. Lengths are
// whole 32-byte steps; Go adds the rest.

// ONES sets the int16 lanes of y to 1.
#define ONES(y) \
	VPCMPEQW y, y, y; \
	VPSRLW   $15, y, y

// HSUMD leaves the sum of y's eight int32 lanes in lane 0 of x (y's low
// half), using tx as scratch.
#define HSUMD(y, x, tx) \
	VEXTRACTI128 $1, y, tx; \
	VPADDD       tx, x, x; \
	VPSHUFD      $0x4e, x, tx; \
	VPADDD       tx, x, x; \
	VPSHUFD      $0xb1, x, tx; \
	VPADDD       tx, x, x

// STEP11(off, acc, t0, t1) adds query·row of the 32 bytes at off to acc.
#define STEP11(off, acc, t0, t1) \
	VMOVDQU    off(DI), t0; \
	VPSIGNB    off(SI), t0, t0; \
	VPABSB     off(SI), t1; \
	VPMADDUBSW t0, t1, t1; \
	VPMADDWD   Y15, t1, t1; \
	VPADDD     t1, acc, acc

// func dot1x1AVX2(q, r *int8, n int) int32
TEXT ·dot1x1AVX2(SB), NOSPLIT, $0-28
	MOVQ  q+0(FP), SI
	MOVQ  r+8(FP), DI
	MOVQ  n+16(FP), CX
	ONES(Y15)
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	CMPQ  CX, $64
	JB    d11one

d11loop:
	STEP11(0, Y0, Y2, Y4)
	STEP11(32, Y1, Y3, Y5)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $64, CX
	CMPQ CX, $64
	JAE  d11loop

d11one:
	CMPQ CX, $32
	JB   d11done
	STEP11(0, Y0, Y2, Y4)

d11done:
	VPADDD Y1, Y0, Y0
	HSUMD(Y0, X0, X1)
	VMOVD  X0, AX
	MOVL   AX, ret+24(FP)
	VZEROUPPER
	RET

// The tiles score one or two queries against four rows, so each row load
// feeds every query. Rows are in SI, DI, BX, DX, queries in R8 and R9, AX
// is the byte offset and CX the bytes left. Each row is loaded into Y10,
// its magnitude taken once into Y11, and each query given the row's sign
// (Y12, Y13). The accumulator of (query i, row j) is Y(4i+j).

// ROW1(r, a0) adds query 0 against row r to a0.
#define ROW1(r, a0) \
	VMOVDQU    (r)(AX*1), Y10; \
	VPABSB     Y10, Y11; \
	VPSIGNB    Y10, Y8, Y12; \
	VPMADDUBSW Y12, Y11, Y12; \
	VPMADDWD   Y15, Y12, Y12; \
	VPADDD     Y12, a0, a0

// ROW2(r, a0, a1) adds queries 0 and 1 against row r to a0 and a1.
#define ROW2(r, a0, a1) \
	VMOVDQU    (r)(AX*1), Y10; \
	VPABSB     Y10, Y11; \
	VPSIGNB    Y10, Y8, Y12; \
	VPSIGNB    Y10, Y9, Y13; \
	VPMADDUBSW Y12, Y11, Y12; \
	VPMADDUBSW Y13, Y11, Y13; \
	VPMADDWD   Y15, Y12, Y12; \
	VPMADDWD   Y15, Y13, Y13; \
	VPADDD     Y12, a0, a0; \
	VPADDD     Y13, a1, a1

// ROWPTRS loads the four row pointers from the array at AX.
#define ROWPTRS \
	MOVQ 0(AX), SI; \
	MOVQ 8(AX), DI; \
	MOVQ 16(AX), BX; \
	MOVQ 24(AX), DX

#define ZERO4(a0, a1, a2, a3) \
	VPXOR a0, a0, a0; \
	VPXOR a1, a1, a1; \
	VPXOR a2, a2, a2; \
	VPXOR a3, a3, a3

// STORE(y, x, off) writes the sum of y's lanes to out+off.
#define STORE(y, x, off) \
	HSUMD(y, x, X14); \
	VMOVD x, off(R12)

#define STORE4(y0, x0, y1, x1, y2, x2, y3, x3, off) \
	STORE(y0, x0, off); \
	STORE(y1, x1, off+4); \
	STORE(y2, x2, off+8); \
	STORE(y3, x3, off+12)

// func dot1x4AVX2(q *int8, r *[4]*int8, n int, out *[4]int32)
TEXT ·dot1x4AVX2(SB), NOSPLIT, $0-32
	MOVQ q+0(FP), R8
	MOVQ r+8(FP), AX
	ROWPTRS
	MOVQ n+16(FP), CX
	XORQ AX, AX
	ONES(Y15)
	ZERO4(Y0, Y1, Y2, Y3)
	TESTQ CX, CX
	JZ    d14done

d14loop:
	VMOVDQU (R8)(AX*1), Y8
	ROW1(SI, Y0)
	ROW1(DI, Y1)
	ROW1(BX, Y2)
	ROW1(DX, Y3)
	ADDQ $32, AX
	SUBQ $32, CX
	JNZ  d14loop

d14done:
	MOVQ out+24(FP), R12
	STORE4(Y0, X0, Y1, X1, Y2, X2, Y3, X3, 0)
	VZEROUPPER
	RET

// The two-query tile avoids VPSIGNB and VPABSB: its queries come offset
// into unsigned bytes, u = e + 64 (query codes e lie in [-63, 63], so u in
// [1, 127]), and VPMADDUBSW multiplies u by the row's signed codes
// directly: a pair sum is at most 2·127·127, no saturation. The caller
// subtracts 64·Σcodes of each row (Codes keeps those sums) to get Σe·c.
// Three vector integer instructions per 32 bytes of a pair instead of
// four and a half.

// ROWU(r, a0, a1) adds offset queries 0 and 1 (Y8, Y9) against row r to
// a0 and a1.
#define ROWU(r, a0, a1) \
	VMOVDQU    (r)(AX*1), Y10; \
	VPMADDUBSW Y10, Y8, Y11; \
	VPMADDUBSW Y10, Y9, Y12; \
	VPMADDWD   Y15, Y11, Y11; \
	VPMADDWD   Y15, Y12, Y12; \
	VPADDD     Y11, a0, a0; \
	VPADDD     Y12, a1, a1

// func dot2x4uAVX2(q *[2]*uint8, r *[4]*int8, n int, out *[8]int32, pf uintptr)
//
// Each step also prefetches 128 bytes at pf + 4·offset: over a call, 4n
// bytes from pf, which the caller points at a group of four rows further
// on. A prefetch never faults, so pf may point anywhere.
TEXT ·dot2x4uAVX2(SB), NOSPLIT, $0-40
	MOVQ q+0(FP), AX
	MOVQ 0(AX), R8
	MOVQ 8(AX), R9
	MOVQ r+8(FP), AX
	ROWPTRS
	MOVQ n+16(FP), CX
	MOVQ pf+32(FP), R10
	XORQ AX, AX
	ONES(Y15)
	ZERO4(Y0, Y1, Y2, Y3)
	ZERO4(Y4, Y5, Y6, Y7)
	TESTQ CX, CX
	JZ    d24udone

d24uloop:
	PREFETCHT0 (R10)(AX*4)
	PREFETCHT0 64(R10)(AX*4)
	VMOVDQU (R8)(AX*1), Y8
	VMOVDQU (R9)(AX*1), Y9
	ROWU(SI, Y0, Y4)
	ROWU(DI, Y1, Y5)
	ROWU(BX, Y2, Y6)
	ROWU(DX, Y3, Y7)
	ADDQ $32, AX
	SUBQ $32, CX
	JNZ  d24uloop

d24udone:
	MOVQ out+24(FP), R12
	STORE4(Y0, X0, Y1, X1, Y2, X2, Y3, X3, 0)
	STORE4(Y4, X4, Y5, X5, Y6, X6, Y7, X7, 16)
	VZEROUPPER
	RET
