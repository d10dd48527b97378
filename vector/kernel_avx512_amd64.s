//go:build !purego

#include "textflag.h"

// AVX-512 kernels. Besides AVX (VEX) instructions for the final sums, they
// use only AVX512F, so every AVX-512 CPU runs them. Tails shorter than 16 floats are read with zero-masking loads:
// masked-off lanes are neither read (no fault past the slice) nor counted
// (they hold +0, and x + 0·0 leaves every real sum unchanged, NaN included).

// HSUM leaves the sum of z's 16 lanes in its lane 0, using t as scratch.
// The zmm-only shuffles keep it within AVX512F for any of the 32 registers.
#define HSUM(z, t) \
	VSHUFF64X2  $0x4e, z, z, t; \
	VADDPS      t, z, z; \
	VSHUFF64X2  $0xb1, z, z, t; \
	VADDPS      t, z, z; \
	VPERMILPS   $0x4e, z, t; \
	VADDPS      t, z, z; \
	VPERMILPS   $0xb1, z, t; \
	VADDPS      t, z, z

// HSUM512 leaves the sum of z's 16 lanes in lane 0 of x (its low lanes),
// halving the width at each step: narrower shuffles have less latency, and
// this sum is on the critical path of every single-pair call. ty and tx
// are one scratch register's ymm and xmm names; all registers must be
// among the low 16 (VEX encodings).
#define HSUM512(z, y, x, ty, tx) \
	VEXTRACTF64X4 $1, z, ty; \
	VADDPS        ty, y, y; \
	VEXTRACTF128  $1, y, tx; \
	VADDPS        tx, x, x; \
	VMOVHLPS      x, x, tx; \
	VADDPS        tx, x, x; \
	VMOVSHDUP     x, tx; \
	VADDSS        tx, x, x

// MINLEN sets CX to min(len(a), len(b)) for slice arguments a and b.
#define MINLEN \
	MOVQ    a_len+8(FP), CX; \
	MOVQ    b_len+32(FP), R12; \
	CMPQ    R12, CX; \
	CMOVQLT R12, CX

// TAILMASK sets K1 to the low CX bits (CX < 16), clobbering R12.
#define TAILMASK \
	MOVL  $1, R12; \
	SHLL  CX, R12; \
	DECL  R12; \
	KMOVW R12, K1

// func dotAVX512(a, b []float32) float32
TEXT ·dotAVX512(SB), NOSPLIT, $0-52
	MOVQ a_base+0(FP), SI
	MOVQ b_base+24(FP), DI
	MINLEN
	// Four independent accumulators hide the FMA latency.
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	CMPQ CX, $64
	JB   dot16

dot64:
	VMOVUPS     (SI), Z4
	VMOVUPS     64(SI), Z5
	VMOVUPS     128(SI), Z6
	VMOVUPS     192(SI), Z7
	VFMADD231PS (DI), Z4, Z0
	VFMADD231PS 64(DI), Z5, Z1
	VFMADD231PS 128(DI), Z6, Z2
	VFMADD231PS 192(DI), Z7, Z3
	ADDQ        $256, SI
	ADDQ        $256, DI
	SUBQ        $64, CX
	CMPQ        CX, $64
	JAE         dot64

dot16:
	CMPQ        CX, $16
	JB          dotTail
	VMOVUPS     (SI), Z4
	VFMADD231PS (DI), Z4, Z0
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JMP         dot16

dotTail:
	TESTQ       CX, CX
	JZ          dotSum
	TAILMASK
	VMOVUPS.Z   (SI), K1, Z4
	VMOVUPS.Z   (DI), K1, Z5
	VFMADD231PS Z5, Z4, Z1

dotSum:
	VADDPS Z1, Z0, Z0
	VADDPS Z3, Z2, Z2
	VADDPS Z2, Z0, Z0
	HSUM512(Z0, Y0, X0, Y4, X4)
	VMOVSS X0, ret+48(FP)
	VZEROUPPER
	RET

// func l2AVX512(a, b []float32) float32
TEXT ·l2AVX512(SB), NOSPLIT, $0-52
	MOVQ a_base+0(FP), SI
	MOVQ b_base+24(FP), DI
	MINLEN
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	CMPQ CX, $64
	JB   l216

l264:
	VMOVUPS     (SI), Z4
	VMOVUPS     64(SI), Z5
	VMOVUPS     128(SI), Z6
	VMOVUPS     192(SI), Z7
	VSUBPS      (DI), Z4, Z4
	VSUBPS      64(DI), Z5, Z5
	VSUBPS      128(DI), Z6, Z6
	VSUBPS      192(DI), Z7, Z7
	VFMADD231PS Z4, Z4, Z0
	VFMADD231PS Z5, Z5, Z1
	VFMADD231PS Z6, Z6, Z2
	VFMADD231PS Z7, Z7, Z3
	ADDQ        $256, SI
	ADDQ        $256, DI
	SUBQ        $64, CX
	CMPQ        CX, $64
	JAE         l264

l216:
	CMPQ        CX, $16
	JB          l2Tail
	VMOVUPS     (SI), Z4
	VSUBPS      (DI), Z4, Z4
	VFMADD231PS Z4, Z4, Z0
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JMP         l216

l2Tail:
	TESTQ       CX, CX
	JZ          l2Sum
	TAILMASK
	VMOVUPS.Z   (SI), K1, Z4
	VMOVUPS.Z   (DI), K1, Z5
	VSUBPS      Z5, Z4, Z4
	VFMADD231PS Z4, Z4, Z1

l2Sum:
	VADDPS Z1, Z0, Z0
	VADDPS Z3, Z2, Z2
	VADDPS Z2, Z0, Z0
	HSUM512(Z0, Y0, X0, Y4, X4)
	VMOVSS X0, ret+48(FP)
	VZEROUPPER
	RET

// Tile kernels score queries against four rows at once, so each row load
// feeds several FMAs. Each (query, row) pair has exactly one accumulator and
// sees the same sequence of operations in the 1×4 and the 4×4 kernel, so a
// pair's score does not depend on which kernel or which slot computed it.
// SI, DI, BX, DX hold the four rows, R8-R11 the queries, AX the byte offset, CX the floats left. The accumulator of (query i, row j) is Z(4i+j).

// LDF loads 16 floats; LDM loads the first CX of them (K1) and zeroes the
// rest, for the tail. Bodies take one of them as ld.
#define LDF(src, dst) VMOVUPS src, dst
#define LDM(src, dst) VMOVUPS.Z src, K1, dst

// LOADR(ld) loads 16 floats of each row at offset AX.
#define LOADR(ld) \
	ld((SI)(AX*1), Z20); \
	ld((DI)(AX*1), Z21); \
	ld((BX)(AX*1), Z22); \
	ld((DX)(AX*1), Z23)

#define LOADQ4(ld) \
	ld((R8)(AX*1), Z16); \
	ld((R9)(AX*1), Z17); \
	ld((R10)(AX*1), Z18); \
	ld((R11)(AX*1), Z19)

// DOT4(q, a0) adds query register q times the four rows into a0..a0+3.
#define DOT4(q, a0, a1, a2, a3) \
	VFMADD231PS Z20, q, a0; \
	VFMADD231PS Z21, q, a1; \
	VFMADD231PS Z22, q, a2; \
	VFMADD231PS Z23, q, a3

// L24(q, a0..a3) adds the squared differences of the four rows and q.
#define L24(q, a0, a1, a2, a3) \
	VSUBPS      q, Z20, Z24; \
	VSUBPS      q, Z21, Z25; \
	VSUBPS      q, Z22, Z26; \
	VSUBPS      q, Z23, Z27; \
	VFMADD231PS Z24, Z24, a0; \
	VFMADD231PS Z25, Z25, a1; \
	VFMADD231PS Z26, Z26, a2; \
	VFMADD231PS Z27, Z27, a3

#define DOT1x4(ld) \
	ld((R8)(AX*1), Z16); \
	LOADR(ld); \
	DOT4(Z16, Z0, Z1, Z2, Z3)

#define L21x4(ld) \
	ld((R8)(AX*1), Z16); \
	LOADR(ld); \
	L24(Z16, Z0, Z1, Z2, Z3)

#define DOT4x4(ld) \
	LOADQ4(ld); \
	LOADR(ld); \
	DOT4(Z16, Z0, Z1, Z2, Z3); \
	DOT4(Z17, Z4, Z5, Z6, Z7); \
	DOT4(Z18, Z8, Z9, Z10, Z11); \
	DOT4(Z19, Z12, Z13, Z14, Z15)

#define L24x4(ld) \
	LOADQ4(ld); \
	LOADR(ld); \
	L24(Z16, Z0, Z1, Z2, Z3); \
	L24(Z17, Z4, Z5, Z6, Z7); \
	L24(Z18, Z8, Z9, Z10, Z11); \
	L24(Z19, Z12, Z13, Z14, Z15)

// TILE(body, ...) runs body over n floats: whole 16-float steps with plain
// loads, then one step with masked loads for the tail. Both compute the
// same per-pair operations, the tail's extra lanes adding +0.
#define TILE(body, loop, tail, done) \
	CMPQ  CX, $16; \
	JB    tail; \
loop: \
	body(LDF); \
	ADDQ  $64, AX; \
	SUBQ  $16, CX; \
	CMPQ  CX, $16; \
	JAE   loop; \
tail: \
	TESTQ CX, CX; \
	JZ    done; \
	TAILMASK; \
	body(LDM); \
done:

// TILEP is TILE with two software prefetches per whole step, at R13+AX
// and R14+AX: rows a later call will read, fetched into L2 while this one
// computes.
#define TILEP(body, loop, tail, done) \
	CMPQ  CX, $16; \
	JB    tail; \
loop: \
	PREFETCHT1 (R13)(AX*1); \
	PREFETCHT1 (R14)(AX*1); \
	body(LDF); \
	ADDQ  $64, AX; \
	SUBQ  $16, CX; \
	CMPQ  CX, $16; \
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

// QPTRS4 loads the four query pointers from the array at AX.
#define QPTRS4 \
	MOVQ 0(AX), R8; \
	MOVQ 8(AX), R9; \
	MOVQ 16(AX), R10; \
	MOVQ 24(AX), R11

#define ZERO4(a0, a1, a2, a3) \
	VPXORD a0, a0, a0; \
	VPXORD a1, a1, a1; \
	VPXORD a2, a2, a2; \
	VPXORD a3, a3, a3

// STORE(z, x, off) writes lane 0 of the reduced z to out+off.
#define STORE(z, x, off) \
	HSUM(z, Z31); \
	VMOVSS x, off(R12)

#define STORE4(z0, x0, z1, x1, z2, x2, z3, x3, off) \
	STORE(z0, x0, off); \
	STORE(z1, x1, off+4); \
	STORE(z2, x2, off+8); \
	STORE(z3, x3, off+12)

// func dot1x4AVX512(q *float32, r *[4]*float32, n int, out *[4]float32)
TEXT ·dot1x4AVX512(SB), NOSPLIT, $0-32
	MOVQ q+0(FP), R8
	MOVQ r+8(FP), AX
	ROWPTRS
	MOVQ n+16(FP), CX
	XORQ AX, AX
	ZERO4(Z0, Z1, Z2, Z3)
	TILE(DOT1x4, d14loop, d14tail, d14done)
	MOVQ out+24(FP), R12
	STORE4(Z0, X0, Z1, X1, Z2, X2, Z3, X3, 0)
	VZEROUPPER
	RET

// func l21x4AVX512(q *float32, r *[4]*float32, n int, out *[4]float32)
TEXT ·l21x4AVX512(SB), NOSPLIT, $0-32
	MOVQ q+0(FP), R8
	MOVQ r+8(FP), AX
	ROWPTRS
	MOVQ n+16(FP), CX
	XORQ AX, AX
	ZERO4(Z0, Z1, Z2, Z3)
	TILE(L21x4, l14loop, l14tail, l14done)
	MOVQ out+24(FP), R12
	STORE4(Z0, X0, Z1, X1, Z2, X2, Z3, X3, 0)
	VZEROUPPER
	RET

// func dot4x4AVX512(q *[4]*float32, r *[4]*float32, n int, out *[16]float32, pf0, pf1 uintptr)
TEXT ·dot4x4AVX512(SB), NOSPLIT, $0-48
	MOVQ pf0+32(FP), R13
	MOVQ pf1+40(FP), R14
	MOVQ q+0(FP), AX
	QPTRS4
	MOVQ r+8(FP), AX
	ROWPTRS
	MOVQ n+16(FP), CX
	XORQ AX, AX
	ZERO4(Z0, Z1, Z2, Z3)
	ZERO4(Z4, Z5, Z6, Z7)
	ZERO4(Z8, Z9, Z10, Z11)
	ZERO4(Z12, Z13, Z14, Z15)
	TILEP(DOT4x4, d44loop, d44tail, d44done)
	MOVQ out+24(FP), R12
	STORE4(Z0, X0, Z1, X1, Z2, X2, Z3, X3, 0)
	STORE4(Z4, X4, Z5, X5, Z6, X6, Z7, X7, 16)
	STORE4(Z8, X8, Z9, X9, Z10, X10, Z11, X11, 32)
	STORE4(Z12, X12, Z13, X13, Z14, X14, Z15, X15, 48)
	VZEROUPPER
	RET

// func l24x4AVX512(q *[4]*float32, r *[4]*float32, n int, out *[16]float32, pf0, pf1 uintptr)
TEXT ·l24x4AVX512(SB), NOSPLIT, $0-48
	MOVQ pf0+32(FP), R13
	MOVQ pf1+40(FP), R14
	MOVQ q+0(FP), AX
	QPTRS4
	MOVQ r+8(FP), AX
	ROWPTRS
	MOVQ n+16(FP), CX
	XORQ AX, AX
	ZERO4(Z0, Z1, Z2, Z3)
	ZERO4(Z4, Z5, Z6, Z7)
	ZERO4(Z8, Z9, Z10, Z11)
	ZERO4(Z12, Z13, Z14, Z15)
	TILEP(L24x4, l44loop, l44tail, l44done)
	MOVQ out+24(FP), R12
	STORE4(Z0, X0, Z1, X1, Z2, X2, Z3, X3, 0)
	STORE4(Z4, X4, Z5, X5, Z6, X6, Z7, X7, 16)
	STORE4(Z8, X8, Z9, X9, Z10, X10, Z11, X11, 32)
	STORE4(Z12, X12, Z13, X13, Z14, X14, Z15, X15, 48)
	VZEROUPPER
	RET

// The 1×1 kernels score one query against one row with the same per-pair
// operations as the tiles. A batch of one query walks the rows with them
// in order: a single stream the hardware prefetcher follows at full
// memory speed, where four rows at once (1×4) are four short streams it
// follows at about 70%. The single FMA chain is latency-bound, but still
// faster than memory.

#define DOT1x1(ld) \
	ld((R8)(AX*1), Z16); \
	ld((SI)(AX*1), Z20); \
	VFMADD231PS Z20, Z16, Z0

#define L21x1(ld) \
	ld((R8)(AX*1), Z16); \
	ld((SI)(AX*1), Z20); \
	VSUBPS      Z16, Z20, Z24; \
	VFMADD231PS Z24, Z24, Z0

// func dot1x1AVX512(q, r *float32, n int) float32
TEXT ·dot1x1AVX512(SB), NOSPLIT, $0-28
	MOVQ   q+0(FP), R8
	MOVQ   r+8(FP), SI
	MOVQ   n+16(FP), CX
	XORQ   AX, AX
	VPXORD Z0, Z0, Z0
	TILE(DOT1x1, d11loop, d11tail, d11done)
	HSUM(Z0, Z31)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func l21x1AVX512(q, r *float32, n int) float32
TEXT ·l21x1AVX512(SB), NOSPLIT, $0-28
	MOVQ   q+0(FP), R8
	MOVQ   r+8(FP), SI
	MOVQ   n+16(FP), CX
	XORQ   AX, AX
	VPXORD Z0, Z0, Z0
	TILE(L21x1, l11loop, l11tail, l11done)
	HSUM(Z0, Z31)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// Six-query tiles: 24 accumulators, Z(4i+j) for query i and row j, the four
// rows in Z24-Z27 and one query at a time in Z28, so a step of 16 floats
// makes ten loads for 24 FMAs (the 4×4 tile: eight for 16). R8-R11, R13,
// R14 hold the queries; R12 and R15 the prefetch addresses until the tail
// (TAILMASK and STORE reuse R12).

#define LOADR6(ld) \
	ld((SI)(AX*1), Z24); \
	ld((DI)(AX*1), Z25); \
	ld((BX)(AX*1), Z26); \
	ld((DX)(AX*1), Z27)

#define DOT4R(q, a0, a1, a2, a3) \
	VFMADD231PS Z24, q, a0; \
	VFMADD231PS Z25, q, a1; \
	VFMADD231PS Z26, q, a2; \
	VFMADD231PS Z27, q, a3

#define L24R(q, a0, a1, a2, a3) \
	VSUBPS      q, Z24, Z29; \
	VFMADD231PS Z29, Z29, a0; \
	VSUBPS      q, Z25, Z30; \
	VFMADD231PS Z30, Z30, a1; \
	VSUBPS      q, Z26, Z31; \
	VFMADD231PS Z31, Z31, a2; \
	VSUBPS      q, Z27, Z29; \
	VFMADD231PS Z29, Z29, a3

#define DOT6x4(ld) \
	LOADR6(ld); \
	ld((R8)(AX*1), Z28); \
	DOT4R(Z28, Z0, Z1, Z2, Z3); \
	ld((R9)(AX*1), Z28); \
	DOT4R(Z28, Z4, Z5, Z6, Z7); \
	ld((R10)(AX*1), Z28); \
	DOT4R(Z28, Z8, Z9, Z10, Z11); \
	ld((R11)(AX*1), Z28); \
	DOT4R(Z28, Z12, Z13, Z14, Z15); \
	ld((R13)(AX*1), Z28); \
	DOT4R(Z28, Z16, Z17, Z18, Z19); \
	ld((R14)(AX*1), Z28); \
	DOT4R(Z28, Z20, Z21, Z22, Z23)

#define L26x4(ld) \
	LOADR6(ld); \
	ld((R8)(AX*1), Z28); \
	L24R(Z28, Z0, Z1, Z2, Z3); \
	ld((R9)(AX*1), Z28); \
	L24R(Z28, Z4, Z5, Z6, Z7); \
	ld((R10)(AX*1), Z28); \
	L24R(Z28, Z8, Z9, Z10, Z11); \
	ld((R11)(AX*1), Z28); \
	L24R(Z28, Z12, Z13, Z14, Z15); \
	ld((R13)(AX*1), Z28); \
	L24R(Z28, Z16, Z17, Z18, Z19); \
	ld((R14)(AX*1), Z28); \
	L24R(Z28, Z20, Z21, Z22, Z23)

#define TILE6(body, loop, tail, done) \
	CMPQ  CX, $16; \
	JB    tail; \
loop: \
	PREFETCHT1 (R12)(AX*1); \
	PREFETCHT1 (R15)(AX*1); \
	body(LDF); \
	ADDQ  $64, AX; \
	SUBQ  $16, CX; \
	CMPQ  CX, $16; \
	JAE   loop; \
tail: \
	TESTQ CX, CX; \
	JZ    done; \
	TAILMASK; \
	body(LDM); \
done:

// SETUP6 expects the query array in AX, the row array in R12; it leaves
// AX zero.
#define SETUP6 \
	MOVQ 0(AX), R8; \
	MOVQ 8(AX), R9; \
	MOVQ 16(AX), R10; \
	MOVQ 24(AX), R11; \
	MOVQ 32(AX), R13; \
	MOVQ 40(AX), R14; \
	MOVQ R12, AX; \
	ROWPTRS; \
	XORQ AX, AX; \
	ZERO4(Z0, Z1, Z2, Z3); \
	ZERO4(Z4, Z5, Z6, Z7); \
	ZERO4(Z8, Z9, Z10, Z11); \
	ZERO4(Z12, Z13, Z14, Z15); \
	ZERO4(Z16, Z17, Z18, Z19); \
	ZERO4(Z20, Z21, Z22, Z23)

// STORE6 writes the 24 sums to the array at R12.
#define STORE6 \
	STORE4(Z0, X0, Z1, X1, Z2, X2, Z3, X3, 0); \
	STORE4(Z4, X4, Z5, X5, Z6, X6, Z7, X7, 16); \
	STORE4(Z8, X8, Z9, X9, Z10, X10, Z11, X11, 32); \
	STORE4(Z12, X12, Z13, X13, Z14, X14, Z15, X15, 48); \
	STORE4(Z16, X16, Z17, X17, Z18, X18, Z19, X19, 64); \
	STORE4(Z20, X20, Z21, X21, Z22, X22, Z23, X23, 80)

// func dot6x4AVX512(q *[6]*float32, r *[4]*float32, n int, out *[24]float32, pf0, pf1 uintptr)
TEXT ·dot6x4AVX512(SB), NOSPLIT, $0-48
	MOVQ q+0(FP), AX
	MOVQ r+8(FP), R12
	SETUP6
	MOVQ pf0+32(FP), R12
	MOVQ pf1+40(FP), R15
	MOVQ n+16(FP), CX
	TILE6(DOT6x4, d64loop, d64tail, d64done)
	MOVQ out+24(FP), R12
	STORE6
	VZEROUPPER
	RET

// func l26x4AVX512(q *[6]*float32, r *[4]*float32, n int, out *[24]float32, pf0, pf1 uintptr)
TEXT ·l26x4AVX512(SB), NOSPLIT, $0-48
	MOVQ q+0(FP), AX
	MOVQ r+8(FP), R12
	SETUP6
	MOVQ pf0+32(FP), R12
	MOVQ pf1+40(FP), R15
	MOVQ n+16(FP), CX
	TILE6(L26x4, l64loop, l64tail, l64done)
	MOVQ out+24(FP), R12
	STORE6
	VZEROUPPER
	RET
