//go:build !purego

#include "textflag.h"

// AVX2+FMA kernels. A tail shorter than 8 floats is read with VMASKMOVPS:
// masked-off lanes are not read (no fault past the slice) and load as +0,
// which leaves every sum unchanged, NaN included.

// tailMask<> is eight all-ones words then eight zero words: the 8 words
// starting at word 8-n select the first n lanes.
DATA tailMask<>+0(SB)/4, $0xffffffff
DATA tailMask<>+4(SB)/4, $0xffffffff
DATA tailMask<>+8(SB)/4, $0xffffffff
DATA tailMask<>+12(SB)/4, $0xffffffff
DATA tailMask<>+16(SB)/4, $0xffffffff
DATA tailMask<>+20(SB)/4, $0xffffffff
DATA tailMask<>+24(SB)/4, $0xffffffff
DATA tailMask<>+28(SB)/4, $0xffffffff
DATA tailMask<>+32(SB)/4, $0
DATA tailMask<>+36(SB)/4, $0
DATA tailMask<>+40(SB)/4, $0
DATA tailMask<>+44(SB)/4, $0
DATA tailMask<>+48(SB)/4, $0
DATA tailMask<>+52(SB)/4, $0
DATA tailMask<>+56(SB)/4, $0
DATA tailMask<>+60(SB)/4, $0
GLOBL tailMask<>(SB), RODATA|NOPTR, $64

// MINLEN sets CX to min(len(a), len(b)) for slice arguments a and b.
#define MINLEN \
	MOVQ    a_len+8(FP), CX; \
	MOVQ    b_len+32(FP), R12; \
	CMPQ    R12, CX; \
	CMOVQLT R12, CX

// TAILMASK loads the mask of the first CX lanes (CX < 8) into Y15,
// clobbering R12 and CX (the tail is the last step).
#define TAILMASK \
	LEAQ    tailMask<>+32(SB), R12; \
	SHLQ    $2, CX; \
	SUBQ    CX, R12; \
	VMOVDQU (R12), Y15

// HSUM leaves the sum of y's 8 lanes in lane 0 of x (y's low half), using
// tx as scratch.
#define HSUM(y, x, tx) \
	VEXTRACTF128 $1, y, tx; \
	VADDPS       tx, x, x; \
	VMOVHLPS     x, x, tx; \
	VADDPS       tx, x, x; \
	VMOVSHDUP    x, tx; \
	VADDSS       tx, x, x

// func dotAVX2(a, b []float32) float32
TEXT ·dotAVX2(SB), NOSPLIT, $0-52
	MOVQ a_base+0(FP), SI
	MOVQ b_base+24(FP), DI
	MINLEN
	// Four independent accumulators hide the FMA latency.
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	CMPQ   CX, $32
	JB     dot8

dot32:
	VMOVUPS     (SI), Y4
	VMOVUPS     32(SI), Y5
	VMOVUPS     64(SI), Y6
	VMOVUPS     96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	CMPQ        CX, $32
	JAE         dot32

dot8:
	CMPQ        CX, $8
	JB          dotTail
	VMOVUPS     (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         dot8

dotTail:
	TESTQ       CX, CX
	JZ          dotSum
	TAILMASK
	VMASKMOVPS  (SI), Y15, Y4
	VMASKMOVPS  (DI), Y15, Y5
	VFMADD231PS Y5, Y4, Y1

dotSum:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM(Y0, X0, X4)
	VMOVSS X0, ret+48(FP)
	VZEROUPPER
	RET

// func l2AVX2(a, b []float32) float32
TEXT ·l2AVX2(SB), NOSPLIT, $0-52
	MOVQ a_base+0(FP), SI
	MOVQ b_base+24(FP), DI
	MINLEN
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	CMPQ   CX, $32
	JB     l28

l232:
	VMOVUPS     (SI), Y4
	VMOVUPS     32(SI), Y5
	VMOVUPS     64(SI), Y6
	VMOVUPS     96(SI), Y7
	VSUBPS      (DI), Y4, Y4
	VSUBPS      32(DI), Y5, Y5
	VSUBPS      64(DI), Y6, Y6
	VSUBPS      96(DI), Y7, Y7
	VFMADD231PS Y4, Y4, Y0
	VFMADD231PS Y5, Y5, Y1
	VFMADD231PS Y6, Y6, Y2
	VFMADD231PS Y7, Y7, Y3
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	CMPQ        CX, $32
	JAE         l232

l28:
	CMPQ        CX, $8
	JB          l2Tail
	VMOVUPS     (SI), Y4
	VSUBPS      (DI), Y4, Y4
	VFMADD231PS Y4, Y4, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         l28

l2Tail:
	TESTQ       CX, CX
	JZ          l2Sum
	TAILMASK
	VMASKMOVPS  (SI), Y15, Y4
	VMASKMOVPS  (DI), Y15, Y5
	VSUBPS      Y5, Y4, Y4
	VFMADD231PS Y4, Y4, Y1

l2Sum:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM(Y0, X0, X4)
	VMOVSS X0, ret+48(FP)
	VZEROUPPER
	RET

// Tile kernels score one or two queries against four rows at once, so each
// row load feeds several FMAs. Each (query, row) pair has exactly one
// accumulator and sees the same operations in the 1×4 and the 2×4 kernel,
// so a pair's score does not depend on which kernel or slot computed it.
// SI, DI, BX, DX hold the rows, R8 and R9 the queries, AX the byte offset, CX the floats left. The accumulator of (query i, row j) is Y(4i+j);
// Y8, Y9 hold the queries, Y10 a row, Y11 and Y12 differences, Y15 the mask.

#define LDF(src, dst) VMOVUPS src, dst
#define LDM(src, dst) VMASKMOVPS src, Y15, dst

// DOTROW(ld, r, ...) loads row r and adds its products with the first nq
// queries; the two-query form names both accumulators.
#define DOTROW1(ld, r, a0) \
	ld((r)(AX*1), Y10); \
	VFMADD231PS Y10, Y8, a0

#define DOTROW2(ld, r, a0, a1) \
	ld((r)(AX*1), Y10); \
	VFMADD231PS Y10, Y8, a0; \
	VFMADD231PS Y10, Y9, a1

#define L2ROW1(ld, r, a0) \
	ld((r)(AX*1), Y10); \
	VSUBPS      Y8, Y10, Y11; \
	VFMADD231PS Y11, Y11, a0

#define L2ROW2(ld, r, a0, a1) \
	ld((r)(AX*1), Y10); \
	VSUBPS      Y8, Y10, Y11; \
	VSUBPS      Y9, Y10, Y12; \
	VFMADD231PS Y11, Y11, a0; \
	VFMADD231PS Y12, Y12, a1

#define DOT1x4(ld) \
	ld((R8)(AX*1), Y8); \
	DOTROW1(ld, SI, Y0); \
	DOTROW1(ld, DI, Y1); \
	DOTROW1(ld, BX, Y2); \
	DOTROW1(ld, DX, Y3)

#define L21x4(ld) \
	ld((R8)(AX*1), Y8); \
	L2ROW1(ld, SI, Y0); \
	L2ROW1(ld, DI, Y1); \
	L2ROW1(ld, BX, Y2); \
	L2ROW1(ld, DX, Y3)

#define DOT2x4(ld) \
	ld((R8)(AX*1), Y8); \
	ld((R9)(AX*1), Y9); \
	DOTROW2(ld, SI, Y0, Y4); \
	DOTROW2(ld, DI, Y1, Y5); \
	DOTROW2(ld, BX, Y2, Y6); \
	DOTROW2(ld, DX, Y3, Y7)

#define L22x4(ld) \
	ld((R8)(AX*1), Y8); \
	ld((R9)(AX*1), Y9); \
	L2ROW2(ld, SI, Y0, Y4); \
	L2ROW2(ld, DI, Y1, Y5); \
	L2ROW2(ld, BX, Y2, Y6); \
	L2ROW2(ld, DX, Y3, Y7)

// TILE(body, ...) runs body over n floats: whole 8-float steps with plain
// loads, then one masked step for the tail.
#define TILE(body, loop, tail, done) \
	CMPQ  CX, $8; \
	JB    tail; \
loop: \
	body(LDF); \
	ADDQ  $32, AX; \
	SUBQ  $8, CX; \
	CMPQ  CX, $8; \
	JAE   loop; \
tail: \
	TESTQ CX, CX; \
	JZ    done; \
	TAILMASK; \
	body(LDM); \
done:

// ROWPTRS loads the four row pointers from the array at AX.
#define ROWPTRS \
	MOVQ 0(AX), SI; \
	MOVQ 8(AX), DI; \
	MOVQ 16(AX), BX; \
	MOVQ 24(AX), DX

#define ZERO4(a0, a1, a2, a3) \
	VXORPS a0, a0, a0; \
	VXORPS a1, a1, a1; \
	VXORPS a2, a2, a2; \
	VXORPS a3, a3, a3

// STORE(y, x, off) writes the sum of y's lanes to out+off.
#define STORE(y, x, off) \
	HSUM(y, x, X14); \
	VMOVSS x, off(R12)

#define STORE4(y0, x0, y1, x1, y2, x2, y3, x3, off) \
	STORE(y0, x0, off); \
	STORE(y1, x1, off+4); \
	STORE(y2, x2, off+8); \
	STORE(y3, x3, off+12)

// func dot1x4AVX2(q *float32, r *[4]*float32, n int, out *[4]float32)
TEXT ·dot1x4AVX2(SB), NOSPLIT, $0-32
	MOVQ q+0(FP), R8
	MOVQ r+8(FP), AX
	ROWPTRS
	MOVQ n+16(FP), CX
	XORQ AX, AX
	ZERO4(Y0, Y1, Y2, Y3)
	TILE(DOT1x4, d14loop, d14tail, d14done)
	MOVQ out+24(FP), R12
	STORE4(Y0, X0, Y1, X1, Y2, X2, Y3, X3, 0)
	VZEROUPPER
	RET

// func l21x4AVX2(q *float32, r *[4]*float32, n int, out *[4]float32)
TEXT ·l21x4AVX2(SB), NOSPLIT, $0-32
	MOVQ q+0(FP), R8
	MOVQ r+8(FP), AX
	ROWPTRS
	MOVQ n+16(FP), CX
	XORQ AX, AX
	ZERO4(Y0, Y1, Y2, Y3)
	TILE(L21x4, l14loop, l14tail, l14done)
	MOVQ out+24(FP), R12
	STORE4(Y0, X0, Y1, X1, Y2, X2, Y3, X3, 0)
	VZEROUPPER
	RET

// func dot2x4AVX2(q *[4]*float32, r *[4]*float32, n int, out *[16]float32)
TEXT ·dot2x4AVX2(SB), NOSPLIT, $0-32
	MOVQ q+0(FP), AX
	MOVQ 0(AX), R8
	MOVQ 8(AX), R9
	MOVQ r+8(FP), AX
	ROWPTRS
	MOVQ n+16(FP), CX
	XORQ AX, AX
	ZERO4(Y0, Y1, Y2, Y3)
	ZERO4(Y4, Y5, Y6, Y7)
	TILE(DOT2x4, d24loop, d24tail, d24done)
	MOVQ out+24(FP), R12
	STORE4(Y0, X0, Y1, X1, Y2, X2, Y3, X3, 0)
	STORE4(Y4, X4, Y5, X5, Y6, X6, Y7, X7, 16)
	VZEROUPPER
	RET

// func l22x4AVX2(q *[4]*float32, r *[4]*float32, n int, out *[16]float32)
TEXT ·l22x4AVX2(SB), NOSPLIT, $0-32
	MOVQ q+0(FP), AX
	MOVQ 0(AX), R8
	MOVQ 8(AX), R9
	MOVQ r+8(FP), AX
	ROWPTRS
	MOVQ n+16(FP), CX
	XORQ AX, AX
	ZERO4(Y0, Y1, Y2, Y3)
	ZERO4(Y4, Y5, Y6, Y7)
	TILE(L22x4, l24loop, l24tail, l24done)
	MOVQ out+24(FP), R12
	STORE4(Y0, X0, Y1, X1, Y2, X2, Y3, X3, 0)
	STORE4(Y4, X4, Y5, X5, Y6, X6, Y7, X7, 16)
	VZEROUPPER
	RET

// The 1×1 kernels score one query against one row with the same per-pair
// operations as the tiles. A batch of one query walks the rows with them
// in order: a single stream the hardware prefetcher follows at full
// memory speed, where four rows at once (1×4) are four short streams.

#define DOT1x1(ld) \
	ld((R8)(AX*1), Y8); \
	DOTROW1(ld, SI, Y0)

#define L21x1(ld) \
	ld((R8)(AX*1), Y8); \
	L2ROW1(ld, SI, Y0)

// func dot1x1AVX2(q, r *float32, n int) float32
TEXT ·dot1x1AVX2(SB), NOSPLIT, $0-28
	MOVQ   q+0(FP), R8
	MOVQ   r+8(FP), SI
	MOVQ   n+16(FP), CX
	XORQ   AX, AX
	VXORPS Y0, Y0, Y0
	TILE(DOT1x1, d11loop, d11tail, d11done)
	HSUM(Y0, X0, X14)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func l21x1AVX2(q, r *float32, n int) float32
TEXT ·l21x1AVX2(SB), NOSPLIT, $0-28
	MOVQ   q+0(FP), R8
	MOVQ   r+8(FP), SI
	MOVQ   n+16(FP), CX
	XORQ   AX, AX
	VXORPS Y0, Y0, Y0
	TILE(L21x1, l11loop, l11tail, l11done)
	HSUM(Y0, X0, X14)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET
