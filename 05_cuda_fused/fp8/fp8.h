/* fp8.h: step 05's FP8 numerics (fp8.c): attention with Q, K, V stored in FP8 (e4m3), the ladder's last rung.
 *
 * The CPU half, which runs everywhere: e4m3 rounding written out, the Walsh-Hadamard rotation, the quantizers
 * (one scale per tensor, or per block), the FP8 attention loop the kernels transcribe, the FP8 emulation of
 * naive attention the checks' tolerance comes from. The GPU half: kernel15_fp8.cu runs the same loop on the
 * tensor cores, kernel16_fp8_pingpong.cu on kernel 14's schedule, kernel17_fp8_split_exp.cu computes part of its
 * exponentials with fp8_exp2_poly's arithmetic, kernel24_fp8_tc_sum.cu leaves the row sums to the tensor cores;
 * fp8_quantize.cu is the quantizer on the GPU. The driver (--dtype fp8: checks, runs, benchmark, error table) is
 * host/fp8.c; nothing here includes host/. */
#ifndef FP8_H
#define FP8_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common.h"
#include "../kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* e4m3 (OCP FP8 "E4M3FN"): 1 sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinity; the largest
 * finite value is 448 = 1.75 x 2^8, the smallest normal 2^-6, the smallest subnormal 2^-9. */
#define FP8_MAX 448.0f
/* Rounding to nearest, ties to even, saturating at +-448 (PTX's cvt.rn.satfinite.e4m3x2.f32); NaN stays NaN. */
uint8_t fp8_from_float(float x);
float fp8_to_float(uint8_t c);

/* The fast Walsh-Hadamard transform of x[D] (D a power of two), scaled by 1/sqrt(D): an orthogonal
 * rotation H (H = H^T, H H = I), so (q H)(k H)^T = q k^T: rotating Q and K leaves the scores as they are
 * and spreads one large entry of a row over all D of them (FlashAttention-3's "incoherent processing"). */
void fwht(float *x, long D);

/* 2^x without the exponential unit (kernel 17's ex2_fma is its transcription): 2^x = 2^floor(x) 2^f, f in
 * [0, 1), 2^f by the cubic below (Horner; minimax in relative error, largest 7.5e-5 on [0, 1)), 2^floor(x)
 * written into a float's exponent. x is clamped to -127, where the result is 0; NaN stays NaN. */
#define FP8_EXP2_C0 0.99992520f
#define FP8_EXP2_C1 0.69583356f
#define FP8_EXP2_C2 0.22606716f
#define FP8_EXP2_C3 0.07802452f
float fp8_exp2_poly(float x);

/* How the scales are chosen. Each scale is amax / 448 over its block, so the block's largest entry lands
 * on e4m3's largest value and nothing saturates. */
typedef enum { FP8_TENSOR = 0, FP8_BLOCK = 1, FP8_HADAMARD = 2 } Fp8Mode;
const char *fp8_mode_name(Fp8Mode m);
#define FP8_QBLOCK 64   /* Q rows per block scale: one consumer warpgroup's rows in the kernel */
#define FP8_KBLOCK 128  /* K rows per block scale: one K tile (BC) */
#define FP8_P_SHIFT 8   /* P is stored as e4m3(2^8 p): p in [0, 1] becomes [0, 256], under 448, and e4m3's
                         * floor (2^-9 before values flush to 0) moves down to 2^-17 of the row's max */

/* Q, K, V of [B, H, N, D] quantized. V is stored transposed, [B, H, D, Npad] (Npad = N rounded up to 32,
 * the padding zero), with its keys permuted inside every 32 (fp8_key_perm): the layout the kernel's second
 * product reads without moving a byte of P (fp8.c says why). Scales: sq [B*H][ceil(N/64)], sk
 * [B*H][ceil(N/128)], sv [B*H] (V: one scale per head: a scale per key block would have to be applied
 * inside P V, tile by tile, to a second accumulator). FP8_TENSOR fills each array with one value. */
typedef struct {
    long B, H, N, D, Npad, nqb, nkb;
    Fp8Mode mode;
    int out;                    /* O's dtype: DT_FP16 (fp8_quantize's choice) or DT_BF16 */
    uint8_t *q, *k, *vt;
    float *sq, *sk, *sv;
} Fp8Tensors;

/* Physical key (0..31) of logical key L (0..31) inside a chunk of 32: a bijection. */
int fp8_key_perm(int L);
/* Quantize (tracked host buffers); 0, or -1 after mem_oom_line's line. */
int fp8_quantize(const float *q, const float *k, const float *v, long B, long H, long N, long D, Fp8Mode mode,
                 Fp8Tensors *t);
void fp8_free(Fp8Tensors *t);
/* V's element (key, d) of head h, in e4m3's value (unscaled), read back through the kernels' layout. */
float fp8_v_at(const Fp8Tensors *t, long h, long key, long d);
/* The attention loop kernel 15 transcribes, on the CPU: out [B, H, N, D] as the kernel's output (t->out). */
void fp8_flash_cpu(const Fp8Tensors *t, int causal, float *out);
/* Naive attention emulated in FP8 on the same quantized inputs: S in float64, P = softmax(S) stored in
 * e4m3 (as 2^8 P), O = P V rounded to fp16. Its error against float64 is the FP8 yardstick: a kernel may
 * be off by at most twice that (tol_fp8), as the 16-bit kernels by twice naive's error in 16 bits. */
void fp8_naive_cpu(const Fp8Tensors *t, int causal, float *out);
/* The same for the rows rows[0 .. nr) of every head only (rows NULL: all N): out [B*H][nr][D]. */
void fp8_naive_rows(const Fp8Tensors *t, int causal, const long *rows, long nr, float *out);
double tol_fp8(double naive_err);

/* --- the GPU half: the kernels (fp8/kernelNN_*.cu, registered as Fp8Kernel in ../kernels.h, their arguments
 * Fp8Args there) ------------------------------------------------------------------------------------------------ */
/* NULL when the FP8 kernels run on this GPU (sm_90a), else one line why not. */
const char *fp8_unavailable(void);
/* The quantizer on the GPU (fp8_quantize.cu), for Q (rows = FP8_QBLOCK) or K (FP8_KBLOCK): x [bh, N, D] fp16 ->
 * x8 [bh, N, D] e4m3 and s [bh][ceil(N / rows)], the rotation fused in when hadamard: fp8_quantize's codes and
 * scales (FP8_BLOCK, FP8_HADAMARD) bit for bit on the same 16-bit values. D 64 or 128; 0, or -1 after one line. */
int fp8_quantize_gpu(const void *x, long bh, long N, long D, long rows, int hadamard, uint8_t *x8, float *s, void *stream);

#ifdef __cplusplus
}
#endif

#endif
