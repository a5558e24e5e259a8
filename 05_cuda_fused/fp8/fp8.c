/*
 * fp8.c: step 05's FP8 numerics on the CPU (fp8.h), beside the kernels that transcribe them: Q, K and V stored in
 * e4m3, one byte an element, so the tensor cores run at twice the 16-bit rate. Here: e4m3's rounding written out,
 * the Walsh-Hadamard rotation, 2^x as kernel 17 computes part of it (fp8_exp2_poly), the quantizers, the attention
 * loop the FP8 kernels transcribe (fp8_flash_cpu), naive attention emulated in FP8 and the tolerance it gives. The
 * driver that checks, times and tabulates them is host/fp8.c; step 07's "break it in FP8" table uses the rounding.
 *
 * What FP8 demands, in the chapter's notation:
 *
 *   Scales. e4m3 holds 448 at most and keeps 3 bits of mantissa, so each tensor is stored as x = s x8,
 *   s = amax / 448 over a block (the whole tensor, or FP8_QBLOCK rows of Q, FP8_KBLOCK rows of K, a head of
 *   V). The tensor cores multiply the bytes, S8 = Q8 K8^T in fp32, and the scales come back as one factor
 *   per tile: s_ij = S8_ij s_q s_k / sqrt(D), folded into the softmax's scale at no cost.
 *
 *   P. The second product wants P in e4m3 too. p = e^(s - m) is in [0, 1] (the running max makes it so:
 *   step 07's first break is what happens without it), so P needs no scale of its own; we store 2^8 p,
 *   which costs nothing (the exponent is s - (m - 8), one subtraction already there) and moves the point
 *   where small p flush to zero from 2^-9 to 2^-17. l sums the fp32 p, O sums the e4m3 ones.
 *
 *   V. The tensor cores read an FP8 operand from shared memory only with its reduction dimension (k)
 *   contiguous: for O = P V that is the key, so V must be stored transposed, [D, N]. And the second product
 *   takes P from the registers the first product left it in, but an FP8 A operand is laid out four
 *   consecutive k to a register while S's accumulator gives a thread two consecutive columns and then two
 *   more, 8 columns on (wgmma.cuh's layout). Rather than move P between threads, we move V's keys: inside
 *   every 32 keys, logical key L = 16h + 4t + e is physical key 16h + 8(e / 2) + 2t + e % 2
 *   (fp8_key_perm). The sum over keys does not care about their order, only that P and V agree on it.
 *   fp8_quantize writes V that way, and fp8_flash_cpu reads it back through the same table, so the CPU
 *   loop below checks the layout before any GPU does.
 *
 *   Hadamard. A row of Q or K with one large entry (an "outlier feature") sets the block's scale and the
 *   small entries lose their bits. Rotating Q and K by the same orthogonal H leaves Q K^T unchanged and
 *   spreads the large entry over the row (fwht). On the GPU the rotation is fused into the quantizer,
 *   which reads Q and K anyway (fp8_quantize_gpu): it costs 0.023 ms of kernel 17's 1.3 ms at N = 8192.
 */
#include "fp8.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ e4m3 */

uint8_t fp8_from_float(float x)
{
    const uint8_t sign = signbit(x) ? 0x80 : 0x00;
    if (isnan(x)) return (uint8_t)(sign | 0x7F);
    const double a = fabs((double)x);
    if (a >= 448.0) return (uint8_t)(sign | 0x7E);            /* satfinite: +-448, infinity included */
    if (a < 0.015625) {                                        /* below 2^-6: subnormal, steps of 2^-9 */
        const int m = (int)nearbyint(a * 512.0);               /* ties to even; m = 8 is 2^-6, code 0x08 */
        return (uint8_t)(sign | m);
    }
    int e2;
    const double f = frexp(a, &e2);                            /* a = f 2^e2, f in [0.5, 1) */
    int e = e2 - 1;                                            /* a = (2f) 2^e, 2f in [1, 2), e in -6 .. 8 */
    int m = (int)nearbyint((2.0 * f - 1.0) * 8.0);             /* 3 bits of mantissa, ties to even */
    if (m == 8) { m = 0; e++; }
    if (e + 7 > 15 || (e + 7 == 15 && m == 7)) return (uint8_t)(sign | 0x7E); /* rounded past 448 */
    return (uint8_t)(sign | (e + 7) << 3 | m);
}

float fp8_to_float(uint8_t c)
{
    const int E = (c >> 3) & 15, M = c & 7;
    const float sign = (c & 0x80) ? -1.0f : 1.0f;
    if (E == 15 && M == 7) return NAN;
    if (E == 0) return sign * ldexpf((float)M, -9);
    return sign * ldexpf(1.0f + M / 8.0f, E - 7);
}

/* ------------------------------------------------------ Walsh-Hadamard */

void fwht(float *x, long D)
{
    for (long h = 1; h < D; h *= 2)                            /* log2 D butterflies: (a, b) -> (a + b, a - b) */
        for (long i = 0; i < D; i += 2 * h)
            for (long j = i; j < i + h; j++) {
                const float a = x[j], b = x[j + h];
                x[j] = a + b;
                x[j + h] = a - b;
            }
    const float s = 1.0f / sqrtf((float)D);                    /* H / sqrt(D): orthogonal */
    for (long i = 0; i < D; i++) x[i] *= s;
}

/* ------------------------------------------------------ 2^x without the MUFU (kernel 17) */

float fp8_exp2_poly(float x)
{
    if (isnan(x)) return x;                                    /* the kernel: max.NaN keeps it, the multiply carries it */
    x = fmaxf(x, -127.0f);
    const float fl = floorf(x);                                /* the kernel: x + 1.5 * 2^23 rounded down, minus 1.5 * 2^23 */
    const float f = x - fl;                                    /* in [0, 1), exact */
    float p = fmaf(FP8_EXP2_C3, f, FP8_EXP2_C2);               /* 2^f: the cubic, Horner */
    p = fmaf(p, f, FP8_EXP2_C1);
    p = fmaf(p, f, FP8_EXP2_C0);
    const float two_fl = fl <= -127.0f ? 0.0f : ldexpf(1.0f, (int)fl);  /* the kernel: floor(x) + 127 into the exponent */
    return p * two_fl;
}

/* ------------------------------------------------------------ quantizers */

const char *fp8_mode_name(Fp8Mode m)
{
    return m == FP8_TENSOR ? "per-tensor" : m == FP8_BLOCK ? "per-block" : "per-block+Hadamard";
}

int fp8_key_perm(int L)
{
    const int h = L / 16, t = (L % 16) / 4, e = L % 4;
    return 16 * h + 8 * (e / 2) + 2 * t + e % 2;
}

void fp8_free(Fp8Tensors *t)
{
    tfree(t->q); tfree(t->k); tfree(t->vt); tfree(t->sq); tfree(t->sk); tfree(t->sv);
    memset(t, 0, sizeof *t);
}

static float amax_of(const float *x, size_t n)
{
    float a = 0.0f;
    for (size_t i = 0; i < n; i++) a = fmaxf(a, fabsf(x[i]));
    return a;
}
static float scale_for(float amax) { return amax > 0.0f ? amax / FP8_MAX : 1.0f; }

/* x [bh, N, D] -> x8 with one scale per `rows` rows of each head (rows >= N: per head), or `tensor_scale`
 * for every block when it is > 0. */
static void quantize_rows(const float *x, long bh, long N, long D, long rows, float tensor_scale, uint8_t *x8, float *s)
{
    const long nb = (N + rows - 1) / rows;
    for (long h = 0; h < bh; h++)
        for (long b = 0; b < nb; b++) {
            const long r0 = b * rows, r1 = r0 + rows < N ? r0 + rows : N;
            const float *xb = x + ((size_t)h * N + r0) * D;
            const float sc = tensor_scale > 0 ? tensor_scale : scale_for(amax_of(xb, (size_t)(r1 - r0) * D));
            s[h * nb + b] = sc;
            for (size_t i = 0; i < (size_t)(r1 - r0) * D; i++) x8[((size_t)h * N + r0) * D + i] = fp8_from_float(xb[i] / sc);
        }
}

int fp8_quantize(const float *q, const float *k, const float *v, long B, long H, long N, long D, Fp8Mode mode,
                 Fp8Tensors *t)
{
    memset(t, 0, sizeof *t);
    const long bh = B * H;
    const size_t n = (size_t)bh * N * D;
    t->B = B, t->H = H, t->N = N, t->D = D, t->mode = mode, t->out = DT_FP16;
    t->Npad = (N + 31) / 32 * 32;
    t->nqb = (N + FP8_QBLOCK - 1) / FP8_QBLOCK;
    t->nkb = (N + FP8_KBLOCK - 1) / FP8_KBLOCK;
    const size_t nvt = (size_t)bh * D * t->Npad;
    t->q = tmalloc(n); t->k = tmalloc(n); t->vt = tmalloc(nvt);
    t->sq = tmalloc((size_t)bh * t->nqb * 4); t->sk = tmalloc((size_t)bh * t->nkb * 4); t->sv = tmalloc((size_t)bh * 4);
    float *qr = mode == FP8_HADAMARD ? tmalloc(n * 4) : NULL, *kr = mode == FP8_HADAMARD ? tmalloc(n * 4) : NULL;
    uint8_t *v8 = tmalloc(n);
    if (!t->q || !t->k || !t->vt || !t->sq || !t->sk || !t->sv || !v8 || (mode == FP8_HADAMARD && (!qr || !kr))) {
        mem_oom_line(mem_refused(), "the FP8 tensors");
        tfree(qr); tfree(kr); tfree(v8); fp8_free(t);
        return -1;
    }
    if (mode == FP8_HADAMARD) {                          /* Q H and K H, row by row: the scores do not change */
        memcpy(qr, q, n * 4); memcpy(kr, k, n * 4);
        for (size_t r = 0; r < (size_t)bh * N; r++) { fwht(qr + r * D, D); fwht(kr + r * D, D); }
        q = qr, k = kr;
    }
    const int tensor = mode == FP8_TENSOR;
    quantize_rows(q, bh, N, D, FP8_QBLOCK, tensor ? scale_for(amax_of(q, n)) : 0, t->q, t->sq);
    quantize_rows(k, bh, N, D, FP8_KBLOCK, tensor ? scale_for(amax_of(k, n)) : 0, t->k, t->sk);
    quantize_rows(v, bh, N, D, N, tensor ? scale_for(amax_of(v, n)) : 0, v8, t->sv);
    for (long h = 0; h < bh; h++)                        /* V^T, keys permuted inside each 32, padding zero */
        for (long d = 0; d < D; d++)
            for (long c = 0; c < t->Npad; c++) {
                const long key = c / 32 * 32 + fp8_key_perm((int)(c % 32));
                t->vt[((size_t)h * D + d) * t->Npad + c] = key < N ? v8[((size_t)h * N + key) * D + d] : 0;
            }
    tfree(qr); tfree(kr); tfree(v8);
    return 0;
}

float fp8_v_at(const Fp8Tensors *t, long h, long key, long d)
{
    long c = key / 32 * 32;
    for (int L = 0; L < 32; L++)
        if (c + fp8_key_perm(L) == key) { c += L; break; }
    return fp8_to_float(t->vt[((size_t)h * t->D + d) * t->Npad + c]);
}

/* --------------------------------------------------- the loop the FP8 kernels run */

/* O rounded as the kernels store it: fp16, or bf16 (t->out). */
static float round_out(const Fp8Tensors *t, float x)
{
    return t->out == DT_BF16 ? bf16_to_f32(f32_to_bf16(x)) : f16_to_f32(f32_to_f16(x));
}

void fp8_flash_cpu(const Fp8Tensors *t, int causal, float *out)
{
    const long N = t->N, D = t->D, BC = FP8_KBLOCK, bh = t->B * t->H;
    const float scale_log2 = softmax_scale_log2(D);                /* log2(e) / sqrt(D): scores in log2 units */
    float *vraw = xmalloc((size_t)N * D * 4, "V in e4m3 values"), *o = xmalloc((size_t)D * 4, "o"),
          *s = xmalloc((size_t)BC * 4, "s_tile"), *q = xmalloc((size_t)D * 4, "q"), *kraw = xmalloc((size_t)N * D * 4, "K");
    for (long h = 0; h < bh; h++) {
        for (long key = 0; key < N; key++)                             /* the bytes' values, once per head */
            for (long d = 0; d < D; d++) {
                vraw[key * D + d] = fp8_v_at(t, h, key, d);
                kraw[key * D + d] = fp8_to_float(t->k[((size_t)h * N + key) * D + d]);
            }
        for (long i = 0; i < N; i++) {                                 /* one query row (the kernel: 16 per warp) */
            for (long d = 0; d < D; d++) q[d] = fp8_to_float(t->q[((size_t)h * N + i) * D + d]);
            const float sq = t->sq[h * t->nqb + i / FP8_QBLOCK];
            float m = -INFINITY, l = 0.0f;                             /* log2 units */
            for (long d = 0; d < D; d++) o[d] = 0.0f;
            const long jend = causal ? i + 1 : N;
            for (long j0 = 0, j = 0; j0 < jend; j0 += BC, j++) {       /* K/V tile j: keys j0 .. j0+BC-1 */
                const long bc = j0 + BC <= N ? BC : N - j0;
                const float sl2 = scale_log2 * sq * t->sk[h * t->nkb + j];  /* the tile's descale, folded in */
                const float *kr = kraw + j0 * D;
                float mt = -INFINITY;
                for (long c = 0; c < bc; c++) {
                    float acc = 0.0f;                                  /* S8 = Q8 K8^T: the bytes' product, fp32 */
                    for (long d = 0; d < D; d++) acc += q[d] * kr[c * D + d];
                    s[c] = causal && j0 + c > i ? -INFINITY : acc;
                    mt = fmaxf(mt, s[c]);
                }
                const float mn = fmaxf(m, mt * sl2);                   /* m_new = max(m, m_tile) */
                const float bse = mn - FP8_P_SHIFT;                    /* p's exponent base: 2^8 p */
                const float alpha = exp2f(m - mn);                     /* alpha = e^(m - m_new) (0 on the first tile) */
                float ls = 0.0f;
                for (long d = 0; d < D; d++) o[d] *= alpha;            /* o = alpha o ... */
                for (long c = 0; c < bc; c++) {
                    const float p = exp2f(s[c] * sl2 - bse);           /* 2^8 p, p = e^(s - m_new) */
                    ls += p;                                           /* l sums the fp32 p ... */
                    const float p8 = fp8_to_float(fp8_from_float(p));  /* ... O the e4m3 ones */
                    for (long d = 0; d < D; d++) o[d] += p8 * vraw[(j0 + c) * D + d]; /* ... + P V_j */
                }
                l = alpha * l + ls;
                m = mn;
            }
            const float inv = l > 0.0f ? t->sv[h] / l : 0.0f;          /* O = o s_v / l */
            for (long d = 0; d < D; d++) out[((size_t)h * N + i) * D + d] = round_out(t, o[d] * inv);
        }
    }
    tfree(vraw); tfree(o); tfree(s); tfree(q); tfree(kraw);
}

/* Head h's e4m3 values (unscaled) of Q, K and V, [N, D] each. */
static void decode_head(const Fp8Tensors *t, long h, float *qraw, float *kraw, float *vraw)
{
    const long N = t->N, D = t->D;
    for (long i = 0; i < N; i++)
        for (long d = 0; d < D; d++) {
            qraw[i * D + d] = fp8_to_float(t->q[((size_t)h * N + i) * D + d]);
            kraw[i * D + d] = fp8_to_float(t->k[((size_t)h * N + i) * D + d]);
            vraw[i * D + d] = fp8_v_at(t, h, i, d);
        }
}

/* Row i of head h of naive FP8 attention into out[D]; s holds N doubles, o D. */
static void naive_row(const Fp8Tensors *t, long h, long i, int causal, const float *qraw, const float *kraw,
                      const float *vraw, double *s, double *o, float *out)
{
    const long N = t->N, D = t->D, nk = causal ? i + 1 : N;
    const double sq = t->sq[h * t->nqb + i / FP8_QBLOCK];
    double mx = -INFINITY, sum = 0;
    for (long c = 0; c < nk; c++) {                                    /* S = Q K^T / sqrt(D), dequantized, float64 */
        double acc = 0;
        for (long d = 0; d < D; d++) acc += (double)qraw[i * D + d] * kraw[c * D + d];
        s[c] = acc * sq * t->sk[h * t->nkb + c / FP8_KBLOCK] / sqrt((double)D);
        mx = fmax(mx, s[c]);
    }
    for (long c = 0; c < nk; c++) sum += (s[c] = exp(s[c] - mx));
    for (long d = 0; d < D; d++) o[d] = 0;
    for (long c = 0; c < nk; c++) {                                    /* P = softmax(S), stored as e4m3(2^8 P) */
        const double p8 = fp8_to_float(fp8_from_float((float)(s[c] / sum * 256.0)));
        for (long d = 0; d < D; d++) o[d] += p8 * vraw[c * D + d];
    }
    for (long d = 0; d < D; d++) out[d] = round_out(t, (float)(o[d] * t->sv[h] / 256.0));
}

void fp8_naive_rows(const Fp8Tensors *t, int causal, const long *rows, long nr, float *out)
{
    const long N = t->N, D = t->D, bh = t->B * t->H;
    double *s = xmalloc((size_t)N * 8, "S row"), *o = xmalloc((size_t)D * 8, "o");
    float *raw = xmalloc((size_t)3 * N * D * 4, "Q, K, V in e4m3 values");
    for (long h = 0; h < bh; h++) {
        decode_head(t, h, raw, raw + N * D, raw + 2 * N * D);
        for (long r = 0; r < nr; r++)
            naive_row(t, h, rows ? rows[r] : r, causal, raw, raw + N * D, raw + 2 * N * D, s, o, out + ((size_t)h * nr + r) * D);
    }
    tfree(s); tfree(o); tfree(raw);
}

void fp8_naive_cpu(const Fp8Tensors *t, int causal, float *out) { fp8_naive_rows(t, causal, NULL, t->N, out); }

double tol_fp8(double naive_err) { return naive_err == naive_err ? 2.0 * naive_err : 0.0; } /* NaN: nothing passes */
