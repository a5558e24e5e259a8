/*
 * fp8.c: step 05 in FP8 (--dtype fp8): Q, K and V stored in e4m3, one byte an element, so the tensor cores
 * run at twice the 16-bit rate; what that costs in accuracy, measured against float64; the CPU loop that
 * kernels 15-17 and 24 transcribe; 2^x as kernel 17 computes part of it (fp8_exp2_poly); and the driver of the
 * kernels' checks and benchmark, with the GPU quantizer (fp8_quantize.cu) checked against fp8_quantize.
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
#define _POSIX_C_SOURCE 200809L /* mkdtemp, for the files check */
#include "fp8.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu.h"

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

/* V's element (key, d) of head h, in e4m3's value (unscaled), read through the kernel's layout. */
static float v_at(const Fp8Tensors *t, long h, long key, long d)
{
    long c = key / 32 * 32;
    for (int L = 0; L < 32; L++)
        if (c + fp8_key_perm(L) == key) { c += L; break; }
    return fp8_to_float(t->vt[((size_t)h * t->D + d) * t->Npad + c]);
}

/* --------------------------------------------------- the loop kernel 15 runs */

/* O rounded as the kernels store it: fp16, or bf16 (t->out). */
static float round_out(const Fp8Tensors *t, float x)
{
    return t->out == DT_BF16 ? bf16_to_f32(f32_to_bf16(x)) : f16_to_f32(f32_to_f16(x));
}

void fp8_flash_cpu(const Fp8Tensors *t, int causal, float *out)
{
    const long N = t->N, D = t->D, BC = FP8_KBLOCK, bh = t->B * t->H;
    const float scale_log2 = 1.4426950408889634f / sqrtf((float)D);  /* log2(e) / sqrt(D): scores in log2 units */
    float *vraw = xmalloc((size_t)N * D * 4, "V in e4m3 values"), *o = xmalloc((size_t)D * 4, "o"),
          *s = xmalloc((size_t)BC * 4, "s_tile"), *q = xmalloc((size_t)D * 4, "q"), *kraw = xmalloc((size_t)N * D * 4, "K");
    for (long h = 0; h < bh; h++) {
        for (long key = 0; key < N; key++)                             /* the bytes' values, once per head */
            for (long d = 0; d < D; d++) {
                vraw[key * D + d] = v_at(t, h, key, d);
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
            vraw[i * D + d] = v_at(t, h, i, d);
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

/* Rows rows[0 .. nr) of every head (rows NULL: all N), out [bh][nr][D]. */
static void naive_rows(const Fp8Tensors *t, int causal, const long *rows, long nr, float *out)
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

void fp8_naive_cpu(const Fp8Tensors *t, int causal, float *out) { naive_rows(t, causal, NULL, t->N, out); }

double tol_fp8(double naive_err) { return naive_err == naive_err ? 2.0 * naive_err : 0.0; } /* NaN: nothing passes */

/* ------------------------------------------------------------- inputs */

/* Q, K, V from the seed; outliers: 0.1% of the entries multiplied by 10 to 100 (FlashAttention-3's test). */
static void make_inputs(float *q, float *k, float *v, size_t n, uint64_t seed, int outliers)
{
    make_qkv(q, k, v, n, seed);
    if (!outliers) return;
    Rng r;
    rng_seed(&r, seed ^ 0x5EEDull);
    float *x[3] = {q, k, v};
    for (int a = 0; a < 3; a++)
        for (size_t i = 0; i < n; i++)
            if (rng_uniform(&r) < 1e-3) x[a][i] *= (float)(10.0 + 90.0 * rng_uniform(&r));
}

/* max abs and RMS error of out against ref */
static void err_of(const float *out, const double *ref, size_t n, double *max_abs, double *rms)
{
    double mx = 0, ss = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)out[i] - ref[i]);
        mx = d > mx || d != d ? d : mx;                                 /* NaN propagates */
        ss += d * d;
    }
    *max_abs = mx;
    *rms = sqrt(ss / (double)n);
}

/* ------------------------------------------------------------ the error table */

typedef struct { double fp16_max, fp16_rms, max[3], rms[3], max_score; } ErrRow;

/* One row of the table for the tensors q, k, v [B, H, N, D]: fp16 storage (exact arithmetic) and the FP8 loop
 * in each mode, against float64. keep: the scaling whose O goes to o_keep (NULL: none kept). */
static ErrRow errors_of(const float *q, const float *k, const float *v, long B, long H, long N, long D, int causal,
                        int keep, float *o_keep)
{
    ErrRow r;
    const long bh = B * H;
    const size_t n = (size_t)bh * N * D;
    float *out = xmalloc(n * 4, "O"), *x16[3];
    double *ref = xmalloc(n * 8, "reference"), *r16 = xmalloc(n * 8, "fp16 reference");
    ref_attention(q, k, v, bh, N, D, causal, ref);
    const float *x[3] = {q, k, v};
    for (int a = 0; a < 3; a++) {                                  /* fp16 storage, arithmetic exact */
        x16[a] = xmalloc(n * 4, "fp16 copy");
        memcpy(x16[a], x[a], n * 4);
        round_to_dtype(x16[a], n, DT_FP16);
    }
    ref_attention(x16[0], x16[1], x16[2], bh, N, D, causal, r16);
    for (size_t i = 0; i < n; i++) out[i] = f16_to_f32(f32_to_f16((float)r16[i]));
    err_of(out, ref, n, &r.fp16_max, &r.fp16_rms);
    for (int m = 0; m < 3; m++) {
        Fp8Tensors t;
        if (fp8_quantize(q, k, v, B, H, N, D, (Fp8Mode)m, &t) != 0) exit(EXIT_FAIL);
        fp8_flash_cpu(&t, causal, out);
        err_of(out, ref, n, &r.max[m], &r.rms[m]);
        if (o_keep && m == keep) memcpy(o_keep, out, n * 4);
        fp8_free(&t);
    }
    r.max_score = 0;                                               /* the largest |q.k| / sqrt(D) a row sees */
    for (long h = 0; h < bh; h++)
        for (long i = 0; i < N; i++)
            for (long j = 0; j <= (causal ? i : N - 1); j++)
                r.max_score = fmax(r.max_score, fabs(dot_f32(q + ((size_t)h * N + i) * D, k + ((size_t)h * N + j) * D, D)) /
                                                    sqrt((double)D));
    for (int a = 0; a < 3; a++) tfree(x16[a]);
    tfree(out); tfree(ref); tfree(r16);
    return r;
}

/* One row of the table: B=1, H heads, N, D, inputs from the seed (Gaussian, or with outliers). */
static ErrRow error_row(long H, long N, long D, int causal, int outliers, uint64_t seed)
{
    const size_t n = (size_t)H * N * D;
    float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V");
    make_inputs(q, k, v, n, seed, outliers);
    const ErrRow r = errors_of(q, k, v, 1, H, N, D, causal, -1, NULL);
    tfree(q); tfree(k); tfree(v);
    return r;
}

/* The table: Gaussian and outliers x D 64, 128 x causal or not; returns 1 if every entry is finite, FP8's
 * error is above fp16's in every row, and on Gaussian inputs the three scalings' RMS errors are within 10% of
 * each other (the lesson's claim: e4m3's exponent covers a Gaussian's range, so the scale's block does not
 * matter; a quantizer that ignored its block's amax, or saturated, would break it). */
static int error_table(long H, long N, int print, FILE *csv)
{
    int ok = 1;
    if (print)
        printf("FP8 (e4m3) attention against float64, B=1 H=%ld N=%ld, the loop kernel 15 runs (fp8_flash_cpu); RMS "
               "error (max abs); max|s|: the largest score a row sees\n%-9s %-4s %-7s %-8s %-19s %-19s %-19s %-19s\n", H, N,
               "inputs", "D", "mask", "max|s|", "fp16 storage", "fp8 per-tensor", "fp8 per-block", "fp8 block+Hadamard");
    for (int out = 0; out < 2; out++)
        for (int di = 0; di < 2; di++)
            for (int causal = 0; causal < 2; causal++) {
                const long D = di ? 128 : 64;
                const ErrRow r = error_row(H, N, D, causal, out, 777 + (uint64_t)(out * 4 + di * 2 + causal));
                for (int m = 0; m < 3; m++) ok &= isfinite(r.rms[m]) && isfinite(r.max[m]) && r.rms[m] > r.fp16_rms;
                if (!out) {                                        /* Gaussian: the three scalings within 10% */
                    const double lo = fmin(r.rms[0], fmin(r.rms[1], r.rms[2])), hi = fmax(r.rms[0], fmax(r.rms[1], r.rms[2]));
                    ok &= hi <= 1.1 * lo;
                }
                if (print) {
                    char c[4][32];
                    snprintf(c[0], 32, "%.2e (%.1e)", r.fp16_rms, r.fp16_max);
                    for (int m = 0; m < 3; m++) snprintf(c[m + 1], 32, "%.2e (%.1e)", r.rms[m], r.max[m]);
                    printf("%-9s %-4ld %-7s %-8.1f %-19s %-19s %-19s %-19s\n", out ? "outliers" : "gaussian", D,
                           causal ? "causal" : "full", r.max_score, c[0], c[1], c[2], c[3]);
                }
                if (csv)
                    fprintf(csv, "%s,%ld,%ld,%d,%.6e,%.6e,%.6e,%.6e,%.6e,%.6e,%.6e,%.6e,%.4f\n", out ? "outliers" : "gaussian", N, D,
                            causal, r.fp16_rms, r.fp16_max, r.rms[0], r.max[0], r.rms[1], r.max[1], r.rms[2], r.max[2], r.max_score);
            }
    return ok;
}

/* ------------------------------------------------------------ break it in FP8 */

/* What the running max protects in FP8. Q scaled by c, so that the scores grow; everything else exact
 * (float64), one thing stored in e4m3: (a) P = e^(s - m) in [0, 1], as the kernels store it (2^8 p); (b) the
 * scores S themselves, before the max is subtracted (e4m3 with saturation at 448, as a kernel that stored S
 * in FP8 to save registers or memory would). Returns the RMS errors of (a) and (b) against float64. */
static void break_row(double c, long N, long D, uint64_t seed, double *rms_p, double *rms_s, double *max_score)
{
    const size_t n = (size_t)N * D;
    float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V");
    double *sc = xmalloc((size_t)N * 8, "scores"), *pa = xmalloc((size_t)N * 8, "P (a)"), *pb = xmalloc((size_t)N * 8, "P (b)");
    make_qkv(q, k, v, n, seed);
    for (size_t i = 0; i < n; i++) q[i] *= (float)c;
    double ea = 0, eb = 0, mxs = 0;
    for (long i = 0; i < N; i++) {
        double m = -INFINITY, mb = -INFINITY, la = 0, lb = 0;
        for (long j = 0; j < N; j++) {
            double acc = 0;
            for (long d = 0; d < D; d++) acc += (double)q[i * D + d] * k[j * D + d];
            sc[j] = acc / sqrt((double)D);
            m = fmax(m, sc[j]);
            mxs = fmax(mxs, fabs(sc[j]));
            pb[j] = fp8_to_float(fp8_from_float((float)sc[j]));        /* (b) S in e4m3, before the max */
            mb = fmax(mb, pb[j]);
        }
        for (long j = 0; j < N; j++) {
            pa[j] = exp(sc[j] - m);                                     /* exact p, then (a) p in e4m3 */
            la += pa[j];
            pb[j] = exp(pb[j] - mb);
            lb += pb[j];
        }
        for (long d = 0; d < D; d++) {
            double o = 0, oa = 0, ob = 0;
            for (long j = 0; j < N; j++) {
                o += pa[j] / la * v[j * D + d];
                oa += fp8_to_float(fp8_from_float((float)(256.0 * pa[j] / la))) / 256.0 * v[j * D + d];
                ob += pb[j] / lb * v[j * D + d];
            }
            ea += (oa - o) * (oa - o);
            eb += (ob - o) * (ob - o);
        }
    }
    *rms_p = sqrt(ea / (double)n), *rms_s = sqrt(eb / (double)n), *max_score = mxs;
    tfree(q); tfree(k); tfree(v); tfree(sc); tfree(pa); tfree(pb);
}

static void break_table(void)
{
    printf("\nbreak it in FP8: what the running max protects (one head, N = 256, D = 64, Q scaled by c; all else exact, one "
           "thing in e4m3):\n%-6s %-12s %-30s %-30s\n", "c", "max |score|", "P = e^(s - m) in e4m3 (kernels)",
           "S in e4m3 before the max");
    static const double cs[] = {1, 4, 16, 64, 256};
    for (int i = 0; i < 5; i++) {
        double a, b, mx;
        break_row(cs[i], 256, 64, 4040, &a, &b, &mx);
        printf("%-6.0f %-12.1f RMS error %-20.2e RMS error %.2e%s\n", cs[i], mx, a, b, mx > 448 ? " (scores past 448 saturate)" : "");
    }
    printf("P stays in [0, 1] whatever the scores: its rounding is 2^-4 of each weight. S rounds by 2^-4 of itself: at a "
           "score of 100, +-4, a factor of e^4 on p; past 448 every score saturates to the same value.\n");
}

/* ------------------------------------------------------------ the CPU checks */

static void check_e4m3(void)
{
    int bad = 0, n = 0;
    for (int c = 0; c < 256; c++) {                                    /* every finite code is its own rounding */
        if ((c & 0x7F) == 0x7F) continue;
        const float x = fp8_to_float((uint8_t)c);
        bad += fp8_from_float(x) != (uint8_t)c;
        n++;
    }
    int ties = 0;
    for (int c = 0; c < 0x7E; c++) {                                   /* the midpoint of two neighbours: to the even code */
        const float a = fp8_to_float((uint8_t)c), b = fp8_to_float((uint8_t)(c + 1)), mid = (a + b) / 2;
        const uint8_t want = (c % 2 == 0) ? (uint8_t)c : (uint8_t)(c + 1);
        bad += fp8_from_float(mid) != want;
        bad += fp8_from_float(nextafterf(mid, 0)) != (uint8_t)c || fp8_from_float(nextafterf(mid, 1e9f)) != (uint8_t)(c + 1);
        ties++;
    }
    bad += fp8_to_float(0x7E) != 448.0f || fp8_from_float(449.0f) != 0x7E || fp8_from_float(1e30f) != 0x7E ||
           fp8_from_float(INFINITY) != 0x7E || fp8_from_float(-INFINITY) != 0xFE || !isnan(fp8_to_float(fp8_from_float(NAN))) ||
           fp8_from_float(ldexpf(1.0f, -10)) != 0 || fp8_from_float(ldexpf(1.5f, -10)) != 1 || fp8_to_float(1) != ldexpf(1.0f, -9);
    report(bad == 0, NULL, "fp8/e4m3", "%d finite codes round to themselves, %d midpoints go to the even code and one "
           "float either side to the neighbours, 448 saturates (449, 1e30, inf), NaN stays NaN, 2^-10 ties to 0 (%d wrong)",
           n, ties, bad);
}

static void check_exp2_poly(void)
{
    double worst = 0;                                                  /* relative error against exp2 in double */
    long n = 0, at = 0;
    for (long i = 0; i <= 134 * 4096; i++, n++) {                      /* x from -126 to 8 (kernel 17's range) by 2^-12 */
        const float x = -126.0f + (float)i / 4096.0f;
        const double want = exp2((double)x), e = fabs(fp8_exp2_poly(x) - want) / want;
        if (!(e <= worst)) worst = e, at = i;                          /* NaN is the worst */
    }
    const int edges = fp8_exp2_poly(-127.0f) == 0.0f && fp8_exp2_poly(-1000.0f) == 0.0f && fp8_exp2_poly(-INFINITY) == 0.0f &&
                      isnan(fp8_exp2_poly(NAN)) && fp8_exp2_poly(0.0f) == FP8_EXP2_C0;
    report(worst < 1e-4 && edges, NULL, "fp8/exp2-poly", "2^x by the cubic (kernel 17's exponentials on the FMA pipes) at %ld "
           "points of [-126, 8]: largest relative error %.2e (at x = %.4f; e4m3 rounds p by up to 6.25e-2), must be < 1e-4; "
           "-127, -1000 and -inf give 0, NaN stays NaN%s", n, worst, -126.0 + at / 4096.0, edges ? "" : " (NOT SO)");
}

static void check_hadamard(void)
{
    Rng r;
    rng_seed(&r, 31);
    for (long D = 64; D <= 128; D *= 2) {
        float x[128] = {0}, y[128] = {0}, a[128] = {0}, b[128] = {0};
        double worst = 0, back = 0, qk = 0;
        for (long i = 0; i < D; i++) x[i] = (float)rng_normal(&r);
        memcpy(y, x, (size_t)D * sizeof x[0]);
        fwht(y, D);
        for (long i = 0; i < D; i++) {                                 /* against H_ij = (-1)^popcount(i & j) / sqrt(D) */
            double h = 0;
            for (long j = 0; j < D; j++) h += (__builtin_popcountl((unsigned long)(i & j)) % 2 ? -1.0 : 1.0) * x[j];
            worst = fmax(worst, fabs(h / sqrt((double)D) - y[i]));
        }
        fwht(y, D);                                                    /* H H = I */
        for (long i = 0; i < D; i++) back = fmax(back, fabs((double)y[i] - x[i]));
        for (long i = 0; i < D; i++) { a[i] = (float)rng_normal(&r); b[i] = (float)rng_normal(&r); }
        double d0 = 0, d1 = 0;
        for (long i = 0; i < D; i++) d0 += (double)a[i] * b[i];
        fwht(a, D); fwht(b, D);
        for (long i = 0; i < D; i++) d1 += (double)a[i] * b[i];
        qk = fabs(d1 - d0);
        char name[48];
        snprintf(name, sizeof name, "fp8/hadamard D=%ld", D);
        report(worst < 1e-5 && back < 1e-5 && qk < 1e-4, NULL, name, "fwht against the explicit matrix %.1e, H H x - x %.1e, "
               "(q H).(k H) - q.k %.1e (tol 1e-5, 1e-5, 1e-4)", worst, back, qk);
    }
}

static void check_layout_and_scales(void)
{
    int seen[32] = {0}, bij = 1;
    for (int L = 0; L < 32; L++) seen[fp8_key_perm(L)]++;
    for (int p = 0; p < 32; p++) bij &= seen[p] == 1;
    /* Quantize a head with a known amax per block: every block's largest entry becomes 448 exactly; every
     * entry in e4m3's normal range comes back within half a step (2^-4 relative); V reads back through the
     * transposed, permuted layout. */
    const long N = 200, D = 64;
    const size_t n = (size_t)N * D;
    float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V");
    make_qkv(q, k, v, n, 99);
    Fp8Tensors t;
    if (fp8_quantize(q, k, v, 1, 1, N, D, FP8_BLOCK, &t) != 0) exit(EXIT_FAIL);
    double worst = 0;
    int top = 0, vbad = 0;
    for (long i = 0; i < N; i++)
        for (long d = 0; d < D; d++) {
            const float sq = t.sq[i / FP8_QBLOCK], x = q[i * D + d], y = fp8_to_float(t.q[i * D + d]) * sq;
            if (fabsf(x) / sq >= 0.015625f) worst = fmax(worst, fabs((double)y - x) / fabs((double)x));
            top += t.q[i * D + d] == 0x7E || t.q[i * D + d] == 0xFE;
            const float vv = v_at(&t, 0, i, d) * t.sv[0];
            vbad += fabsf(vv - v[i * D + d]) > 0.0625f * fabsf(v[i * D + d]) + 1e-3f * t.sv[0];
        }
    const int blocks = (int)t.nqb;
    fp8_free(&t);
    tfree(q); tfree(k); tfree(v);
    report(bij && worst <= 0.0625 && top >= blocks && vbad == 0, NULL, "fp8/quantize",
           "the key permutation a bijection (%s), Q per %d rows: worst relative error %.4f (<= 2^-4), %d entries at +-448 "
           "(>= one per block, %d blocks), V through its transposed layout: %d wrong", bij ? "yes" : "no", FP8_QBLOCK,
           worst, top, blocks, vbad);
}

/* One case of check_loop: the CPU loop against float64, O stored in out_dt (fp16 or bf16). */
static void loop_case(Fp8Mode mode, long N, long D, int causal, int out_dt)
{
    const long H = 2;
    const size_t n = (size_t)H * N * D;
    float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V");
    float *out = xmalloc(n * 4, "O"), *nv = xmalloc(n * 4, "naive O");
    double *ref = xmalloc(n * 8, "reference");
    make_inputs(q, k, v, n, 500 + (uint64_t)(N * 4 + (D == 128) * 2 + causal), 0);
    ref_attention(q, k, v, H, N, D, causal, ref);
    Fp8Tensors t;
    if (fp8_quantize(q, k, v, 1, H, N, D, mode, &t) != 0) exit(EXIT_FAIL);
    t.out = out_dt;
    fp8_naive_cpu(&t, causal, nv);
    fp8_flash_cpu(&t, causal, out);
    double nmax, nrms;
    err_of(nv, ref, n, &nmax, &nrms);
    const double tol = tol_fp8(nmax);
    const Err e = compare(out, ref, n, tol, 0);
    char name[96], eb[128];
    snprintf(name, sizeof name, "fp8/cpu-loop %s N=%ld D=%ld%s%s", fp8_mode_name(mode), N, D, causal ? " causal" : "",
             out_dt == DT_BF16 ? " bf16-out" : "");
    report(e.n_bad == 0 && e.max_abs <= tol, &e, name, "%s; naive fp8 %.2e, tol %.2e", fmt_err(&e, eb, sizeof eb), nmax, tol);
    fp8_free(&t);
    tfree(q); tfree(k); tfree(v); tfree(out); tfree(nv); tfree(ref);
}

/* The loop kernels 15-17 and 24 run, on the CPU, against float64 within twice naive FP8's error, at odd N (and with O in
 * bf16 at one N). */
static void check_loop(void)
{
    static const long Ns[] = {1, 17, 64, 65, 129, 257};
    for (int mi = 0; mi < 3; mi++)
        for (long D = 64; D <= 128; D *= 2)
            for (size_t a = 0; a < sizeof Ns / sizeof Ns[0]; a++)
                for (int causal = 0; causal < 2; causal++)
                    if (mi == FP8_BLOCK || (Ns[a] == 257 && D == 64))        /* the other modes at one shape */
                        loop_case((Fp8Mode)mi, Ns[a], D, causal, DT_FP16);
    for (long D = 64; D <= 128; D *= 2)                                       /* O stored in bf16 */
        for (int causal = 0; causal < 2; causal++) loop_case(FP8_BLOCK, 257, D, causal, DT_BF16);
}

static int fp8_files(const Opts *o, int scaling, int print);

/* --dtype fp8 --q --k --v --out on the CPU: the O the files path writes, read back from its .npy, is
 * fp8_flash_cpu's on the same tensors bit for bit (the tensors and their shape taken from the files; N = 100,
 * not a multiple of any block; causal; the Hadamard scaling, the one with the most steps). */
static void check_files(void)
{
    char dir[] = "/tmp/step05-fp8-XXXXXX", path[4][4200];
    if (!mkdtemp(dir)) { report(0, NULL, "fp8/files", "cannot make a temporary directory"); return; }
    enum { B = 1, H = 2, N = 100, D = 64 };
    const size_t n = (size_t)B * H * N * D;
    const long shp[4] = {B, H, N, D};
    float *x[3], *want = xmalloc(n * 4, "O");
    for (int a = 0; a < 3; a++) x[a] = xmalloc(n * 4, "input");
    make_inputs(x[0], x[1], x[2], n, 31, 1);
    static const char *const name[4] = {"q", "k", "v", "o"};
    int wrote = 1;
    for (int a = 0; a < 4; a++) snprintf(path[a], sizeof path[a], "%s/%s.npy", dir, name[a]);
    for (int a = 0; a < 3; a++) wrote &= npy_save(path[a], x[a], shp, 4, DT_FP32) == 0;
    Opts o;
    opts_init(&o, g_prog, OPT_SHAPE | OPT_NPY | OPT_CAUSAL, 1u << DT_FP8);
    o.B = B, o.H = H, o.N = N, o.D = D, o.causal = 1;
    o.qfile = path[0], o.kfile = path[1], o.vfile = path[2], o.outfile = path[3];
    size_t bad = n;
    if (wrote && fp8_files(&o, FP8_HADAMARD, 0) == EXIT_OK) {
        float *got = npy_load("--out", path[3], shp, 4);
        Fp8Tensors t;
        if (fp8_quantize(x[0], x[1], x[2], B, H, N, D, FP8_HADAMARD, &t) == 0) {
            fp8_flash_cpu(&t, 1, want);
            fp8_free(&t);
            bad = 0;
            for (size_t i = 0; i < n; i++) bad += !(got[i] == want[i]); /* ==: a NaN never equals */
        }
        tfree(got);
    }
    report(bad == 0, NULL, "fp8/files", "--q --k --v --out on the CPU (B=1 H=2 N=100 D=64, causal, Hadamard): O read back "
           "from its .npy equals fp8_flash_cpu's on the same tensors bit for bit (%zu of %zu differ)", bad, n);
    for (int a = 0; a < 4; a++) unlink(path[a]);
    rmdir(dir);
    for (int a = 0; a < 3; a++) tfree(x[a]);
    tfree(want);
}

void fp8_cpu_checks(void)
{
    check_e4m3();
    check_hadamard();
    check_exp2_poly();
    check_layout_and_scales();
    check_loop();
    check_files();
    const int ok = error_table(2, 256, 0, NULL);
    report(ok, NULL, "fp8/error-table", "the table at N=256 (Gaussian and outliers, D 64 and 128, causal or not, three "
           "scalings): every error finite, FP8's above fp16 storage's in every cell, on Gaussian inputs the three "
           "scalings within 10%% of each other");
}

/* ------------------------------------------------------------ the GPU half */

#ifdef HAVE_CUDA
#include "../../01_naive/naive.h"
#include "../kernels.h"

typedef struct {
    Fp8Args a;
    size_t n;      /* elements of O */
} Fp8Dev;

/* The FP8 kernels, in id order; only: 0 for all, else one id. */
/* The FP8 kernels, from the registry (kernels.h) in id order: fp8_at(x) for x < fp8_count(). */
#define N_FP8_KERNELS MAX_KERNELS
static int fp8_count(void) { int n; fp8_kernels(&n); return n; }
static const Fp8Kernel *fp8_at(int x) { int n; return fp8_kernels(&n)[x]; }

static void dev_upload(const Fp8Tensors *t, int causal, Fp8Dev *d)
{
    const long bh = t->B * t->H;
    d->n = (size_t)bh * t->N * t->D;
    Fp8Args *a = &d->a;
    a->B = t->B, a->H = t->H, a->N = t->N, a->D = t->D, a->Npad = t->Npad, a->nqb = t->nqb, a->nkb = t->nkb;
    a->causal = causal, a->out_dtype = t->out;
    a->q = dupload_bytes(t->q, d->n, "Q (e4m3)");
    a->k = dupload_bytes(t->k, d->n, "K (e4m3)");
    a->vt = dupload_bytes(t->vt, (size_t)bh * t->D * t->Npad, "V^T (e4m3)");
    a->sq = dupload(t->sq, (size_t)bh * t->nqb, DT_FP32, "Q's scales");
    a->sk = dupload(t->sk, (size_t)bh * t->nkb, DT_FP32, "K's scales");
    a->sv = dupload(t->sv, (size_t)bh, DT_FP32, "V's scales");
    a->o = dmalloc(d->n * 2, t->out == DT_BF16 ? "O (bf16)" : "O (fp16)");
}

static void dev_free(Fp8Dev *d)
{
    dfree((void *)d->a.q); dfree((void *)d->a.k); dfree((void *)d->a.vt);
    dfree((void *)d->a.sq); dfree((void *)d->a.sk); dfree((void *)d->a.sv); dfree(d->a.o);
}

/* One run on an output filled with NaN (an element the kernel forgets fails the check); 0 or -1. */
static int dev_run(const Fp8Kernel *k, Fp8Dev *d, float *out)
{
    dpoison(d->a.o, d->n, d->a.out_dtype);
    if (k->launch(&d->a, NULL) != 0) return -1;
    gpu_sync_check();
    ddownload(out, d->a.o, d->n, d->a.out_dtype);
    return 0;
}

/* The FP8 kernels on one problem: against float64 within twice naive FP8's error, twice bit-identical, and
 * their distance to the CPU loop they transcribe (printed, not checked: the two differ in the order of fp32
 * sums and in ex2, and a p that lands on the other side of an e4m3 rounding boundary moves its weight by
 * 2^-4, which on a causal row of few keys shows in the output). */
static void check_gpu_problem(long only, long B, long H, long N, long D, int causal, Fp8Mode mode, int outliers, int out_dt,
                              uint64_t seed)
{
    const size_t n = (size_t)B * H * N * D;
    float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V"), *out = xmalloc(n * 4, "O"),
          *again = xmalloc(n * 4, "O again"), *nv = xmalloc(n * 4, "naive O"), *cpu = xmalloc(n * 4, "CPU loop's O");
    double *ref = xmalloc(n * 8, "reference");
    make_inputs(q, k, v, n, seed, outliers);
    ref_attention(q, k, v, B * H, N, D, causal, ref);
    Fp8Tensors t;
    if (fp8_quantize(q, k, v, B, H, N, D, mode, &t) != 0) exit(EXIT_FAIL);
    t.out = out_dt;
    fp8_naive_cpu(&t, causal, nv);
    fp8_flash_cpu(&t, causal, cpu);
    double nmax, nrms;
    err_of(nv, ref, n, &nmax, &nrms);
    const double tol = tol_fp8(nmax);
    Fp8Dev d;
    dev_upload(&t, causal, &d);
    for (int x = 0; x < fp8_count(); x++) {
        const Fp8Kernel *kn = fp8_at(x);
        if (only && kn->id != only) continue;
        char name[192], eb[128];
        snprintf(name, sizeof name, "kernel%d fp8 %s%s B=%ld H=%ld N=%ld D=%ld%s%s", kn->id, fp8_mode_name(mode),
                 outliers ? " outliers" : "", B, H, N, D, causal ? " causal" : "", out_dt == DT_BF16 ? " bf16-out" : "");
        if (dev_run(kn, &d, out) != 0) {
            report(0, NULL, name, "the launch failed");
            continue;
        }
        const Err e = compare(out, ref, n, tol, 0);
        double cmax = 0;
        for (size_t i = 0; i < n; i++) cmax = fmax(cmax, fabs((double)out[i] - cpu[i]));
        report(e.n_bad == 0 && e.max_abs <= tol, &e, name, "%s; naive fp8 %.2e, tol %.2e; the CPU loop %.1e away",
               fmt_err(&e, eb, sizeof eb), nmax, tol, cmax);
        const int again_ran = dev_run(kn, &d, again) == 0;
        snprintf(name + strlen(name), sizeof name - strlen(name), " rerun");
        report(again_ran && !memcmp(out, again, n * 4), NULL, name, "two runs bit-identical");
    }
    dev_free(&d);
    fp8_free(&t);
    tfree(q); tfree(k); tfree(v); tfree(out); tfree(again); tfree(nv); tfree(cpu); tfree(ref);
}

/* The GPU quantizer (fp8_quantize.cu) against fp8_quantize, byte for byte and scale for scale, on 16-bit inputs
 * with outliers, at odd N, per block and with the rotation fused in. */
static void check_quantize_gpu(void)
{
    static const long Ns[] = {1, 65, 257, 1000};
    for (long D = 64; D <= 128; D *= 2)
        for (int had = 0; had < 2; had++) {
            long codes = 0, bad_codes = 0, scales = 0, bad_scales = 0;
            int rc = 0;
            for (size_t a = 0; a < sizeof Ns / sizeof Ns[0]; a++) {
                const long N = Ns[a], bh = 2;
                const size_t n = (size_t)bh * N * D;
                float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V");
                make_inputs(q, k, v, n, 7000 + (uint64_t)(N + D + had), 1);
                round_to_dtype(q, n, DT_FP16); round_to_dtype(k, n, DT_FP16);   /* the GPU reads 16-bit Q and K */
                Fp8Tensors t;
                if (fp8_quantize(q, k, v, 1, bh, N, D, had ? FP8_HADAMARD : FP8_BLOCK, &t) != 0) exit(EXIT_FAIL);
                for (int which = 0; which < 2; which++) {                        /* Q, then K */
                    const long rows = which ? FP8_KBLOCK : FP8_QBLOCK, nb = which ? t.nkb : t.nqb;
                    void *dx = dupload(which ? k : q, n, DT_FP16, which ? "K" : "Q");
                    uint8_t *d8 = dmalloc(n, "e4m3 codes"), *h8 = xmalloc(n, "e4m3 codes");
                    float *ds = dmalloc((size_t)bh * nb * 4, "scales"), *hs = xmalloc((size_t)bh * nb * 4, "scales");
                    rc |= fp8_quantize_gpu(dx, bh, N, D, rows, had, d8, ds, NULL);
                    gpu_sync_check();
                    ddownload_bytes(h8, d8, n);
                    ddownload(hs, ds, (size_t)bh * nb, DT_FP32);
                    const uint8_t *want8 = which ? t.k : t.q;
                    const float *want_s = which ? t.sk : t.sq;
                    for (size_t i = 0; i < n; i++) bad_codes += h8[i] != want8[i];
                    for (long i = 0; i < bh * nb; i++) bad_scales += memcmp(&hs[i], &want_s[i], 4) != 0;
                    codes += (long)n, scales += bh * nb;
                    dfree(dx); dfree(d8); dfree(ds); tfree(h8); tfree(hs);
                }
                fp8_free(&t);
                tfree(q); tfree(k); tfree(v);
            }
            char name[64];
            snprintf(name, sizeof name, "fp8/quantize-gpu D=%ld%s", D, had ? " Hadamard" : "");
            report(rc == 0 && bad_codes == 0 && bad_scales == 0, NULL, name, "Q and K quantized on the GPU%s (N = 1, 65, 257, "
                   "1000; outliers) against fp8_quantize: %ld of %ld codes and %ld of %ld scales differ", had ?
                   " with the rotation fused in" : "", bad_codes, codes, bad_scales, scales);
        }
}

static void fp8_gpu_checks(long only)
{
    const char *why = fp8_unavailable();
    if (why) { report_skip("fp8-kernels", "%s", why); return; }
    check_quantize_gpu();
    static const long Ns[] = {1, 2, 17, 63, 64, 65, 257, 1000, 1025};
    for (int di = 0; di < 2; di++)
        for (size_t a = 0; a < sizeof Ns / sizeof Ns[0]; a++)
            for (int causal = 0; causal < 2; causal++)
                check_gpu_problem(only, 1, 3, Ns[a], di ? 128 : 64, causal, FP8_BLOCK, 0, DT_FP16,
                                  6000 + (uint64_t)(Ns[a] * 4 + di * 2 + causal));
    for (int di = 0; di < 2; di++)                        /* the other scalings, and outliers, at one shape */
        for (int mi = 0; mi < 3; mi++)
            check_gpu_problem(only, 2, 2, 257, di ? 128 : 64, mi == 1, (Fp8Mode)mi, 1, DT_FP16, 6100 + (uint64_t)(di * 3 + mi));
    static const long Nb[] = {65, 1000};                  /* O in bf16 */
    for (int di = 0; di < 2; di++)
        for (size_t a = 0; a < sizeof Nb / sizeof Nb[0]; a++)
            for (int causal = 0; causal < 2; causal++)
                check_gpu_problem(only, 1, 3, Nb[a], di ? 128 : 64, causal, FP8_BLOCK, 0, DT_BF16,
                                  6200 + (uint64_t)(Nb[a] + di * 2 + causal));
}

/* --- the benchmark: FlashAttention's shapes, the FP8 kernels against the best 16-bit kernel ------------ */

typedef struct { const Fp8Kernel *k; const Fp8Dev *d; } Fp8Ctx;
static void run_fp8(void *ctx) { const Fp8Ctx *c = ctx; (void)c->k->launch(&c->d->a, NULL); }
typedef struct { const FusedKernel *k; void *q, *kk, *v, *o; long B, H, N, D; int causal; } F16Ctx;
static void run_f16(void *ctx)
{
    const F16Ctx *c = ctx;
    (void)c->k->launch(c->q, c->kk, c->v, c->o, c->B, c->H, c->N, c->D, DT_FP16, c->causal, NULL);
}

/* The selected FP8 kernels (on d, already uploaded) and kernel 14 in fp16 (on q, k, v, the same inputs before
 * quantizing) on one shape, interleaved; tf[0 .. nk) the FP8 kernels' TFLOP/s, tf[nk] kernel 14's (0 where one
 * did not run), ms the same in milliseconds. */
static int time_shape(const Opts *o, const float *q, const float *k, const float *v, const Fp8Dev *d, const Fp8Kernel **ks,
                      int nk, double *tf, double *ms)
{
    const long B = d->a.B, H = d->a.H, N = d->a.N, D = d->a.D;
    const FusedKernel *k16 = fused_kernel(14);
    F16Ctx f = {k16, dupload(q, d->n, DT_FP16, "Q"), dupload(k, d->n, DT_FP16, "K"), dupload(v, d->n, DT_FP16, "V"),
                dmalloc(d->n * 2, "O"), B, H, N, D, o->causal};
    Fp8Ctx c[N_FP8_KERNELS];
    void (*fns[N_FP8_KERNELS + 1])(void *);
    void *ctxs[N_FP8_KERNELS + 1];
    int m = 0, ok = 1;
    for (int x = 0; x < nk; x++) {
        c[x].k = ks[x], c[x].d = d;
        fns[m] = run_fp8, ctxs[m++] = &c[x];
        ok &= ks[x]->launch(&d->a, NULL) == 0;
    }
    const int have16 = k16 && !FUSED_UNAVAILABLE(k16) && k16->launch(f.q, f.kk, f.v, f.o, B, H, N, D, DT_FP16, o->causal, NULL) == 0;
    if (have16) fns[m] = run_f16, ctxs[m++] = &f;
    gpu_sync_check();
    double t_ms[N_FP8_KERNELS + 1] = {0};
    if (ok) gpu_time_interleaved_ms((void (*const *)(void *))fns, (void *const *)ctxs, m, 3, (int)o->repeat, t_ms);
    const double fl = 4.0 * B * H * (double)N * N * D / (o->causal ? 2 : 1);
    for (int x = 0; x <= nk; x++) { tf[x] = 0; ms[x] = 0; }
    for (int x = 0; x < nk && ok; x++) ms[x] = t_ms[x], tf[x] = fl / t_ms[x] / 1e9;
    if (have16 && ok) ms[nk] = t_ms[m - 1], tf[nk] = fl / t_ms[m - 1] / 1e9;
    dfree(f.q); dfree(f.kk); dfree(f.v); dfree(f.o);
    return ok ? 0 : -1;
}

typedef struct { const void *q, *k; uint8_t *x8; float *s; long bh, N, D; int had; } QuantCtx;
static void run_quant(void *ctx)                          /* Q and K, as a model's layer would before attention */
{
    const QuantCtx *c = ctx;
    (void)fp8_quantize_gpu(c->q, c->bh, c->N, c->D, FP8_QBLOCK, c->had, c->x8, c->s, NULL);
    (void)fp8_quantize_gpu(c->k, c->bh, c->N, c->D, FP8_KBLOCK, c->had, c->x8 + (size_t)c->bh * c->N * c->D, c->s, NULL);
}

static int select_kernels(long only, const Fp8Kernel **ks)
{
    int nk = 0;
    for (int x = 0; x < fp8_count(); x++)
        if (!only || fp8_at(x)->id == only) ks[nk++] = fp8_at(x);
    return nk;
}

static int fp8_bench(const Opts *o, FILE *csv)
{
    const char *why = fp8_unavailable();
    if (why) { printf("step05 --dtype fp8 --bench: %s\n", why); return EXIT_SKIP; }
    const Fp8Kernel *ks[N_FP8_KERNELS];
    const int nk = select_kernels(o->kernel, ks);
    printf("step05 --dtype fp8 --bench%s: batch = 16384/N, heads = 2048/D, TFLOP/s = %s*B*H*N*N*D / time (median of %ld "
           "runs, the kernels of a shape interleaved run by run)\ndevice: %s\n", o->causal ? " --causal" : "",
           o->causal ? "2" : "4", o->repeat, gpu_describe());
    double gms = -1, gms8 = -1;
    const double c16 = gemm_ceiling_tflops(DT_FP16, 8192, (int)o->repeat, &gms);
    const double c8 = gemm_ceiling_fp8_tflops(8192, (int)o->repeat, &gms8);
    printf("matrix-product ceilings: cuBLAS GEMM 8192^3, fp16 in, fp32 accumulate: %.1f TFLOP/s; cublasLt, e4m3 in, fp32 "
           "accumulate (fast), fp16 out: %.1f TFLOP/s\n", c16, c8);
    if (csv) {
        fprintf(csv, "ceiling,fp16,-1,cuBLAS GEMM,1,1,8192,8192,%.6f,%.4f\n", gms, c16);
        fprintf(csv, "ceiling,fp8,-1,cublasLt GEMM,1,1,8192,8192,%.6f,%.4f\n", gms8, c8);
    }
    printf("quantize: Q and K from fp16 to e4m3 with per-block scales on the GPU (fp8_quantize_gpu), as a layer would "
           "before attention, without and with the Walsh-Hadamard rotation fused in;\n\"+ quantize\": the best FP8 kernel's "
           "TFLOP/s counting that time too, per block / per block + Hadamard\n");
    printf("%-5s %-6s", "D", "N");
    for (int x = 0; x < nk; x++) printf(" kernel %-2d fp8   ", ks[x]->id);
    printf(" kernel 14 fp16   best fp8/fp16  + quantize (block / Hadamard)\n");
    for (long D = 64; D <= 128; D *= 2) {
        if ((o->given & OPT_GIVEN_DIM) && D != o->D) continue; /* --dim: that D only */
        const long qbh = 2048 / D * 16384 / 8192, qN = 8192;     /* B*H*N*D of every bench shape: the same bytes */
        const size_t nq = (size_t)qbh * qN * D;
        float *hq = xmalloc(nq * 4, "Q for the quantizer's timing"), *hk = xmalloc(nq * 4, "K"), *hv = xmalloc(nq * 4, "V");
        make_qkv(hq, hk, hv, nq, o->seed + 1);
        QuantCtx qc = {dupload(hq, nq, DT_FP16, "Q"), dupload(hk, nq, DT_FP16, "K"), dmalloc(2 * nq, "e4m3 Q and K"),
                       dmalloc((size_t)qbh * (qN / FP8_QBLOCK) * 4, "scales"), qbh, qN, D, 0};
        tfree(hq); tfree(hk); tfree(hv);
        const double qb_ms = gpu_time_median_ms(run_quant, &qc, 2, (int)o->repeat);
        qc.had = 1;
        const double qh_ms = gpu_time_median_ms(run_quant, &qc, 2, (int)o->repeat);
        dfree((void *)qc.q); dfree((void *)qc.k); dfree(qc.x8); dfree(qc.s);
        for (long N = 512; N <= 16384; N *= 2) {
            const long B = 16384 / N, H = 2048 / D;
            const size_t n = (size_t)B * H * N * D;
            float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V");
            make_qkv(q, k, v, n, o->seed + (uint64_t)N);
            Fp8Tensors t;
            if (fp8_quantize(q, k, v, B, H, N, D, FP8_BLOCK, &t) != 0) return EXIT_FAIL;
            Fp8Dev d;
            dev_upload(&t, o->causal, &d);
            fp8_free(&t);
            double tf[N_FP8_KERNELS + 1], ms[N_FP8_KERNELS + 1];
            const int trc = time_shape(o, q, k, v, &d, ks, nk, tf, ms);
            dev_free(&d);
            tfree(q); tfree(k); tfree(v);
            if (trc != 0) return EXIT_FAIL;
            double best = 0, best_ms = 0;
            printf("%-5ld %-6ld", D, N);
            for (int x = 0; x < nk; x++) {
                printf(" %-16.1f", tf[x]);
                if (tf[x] > best) best = tf[x], best_ms = ms[x];
            }
            printf(" %-16.1f %-14.2f %.1f / %.1f (%.3f / %.3f ms)\n", tf[nk], tf[nk] > 0 ? best / tf[nk] : 0,
                   best_ms > 0 ? best * best_ms / (best_ms + qb_ms) : 0, best_ms > 0 ? best * best_ms / (best_ms + qh_ms) : 0,
                   qb_ms, qh_ms);
            if (csv) {
                for (int x = 0; x < nk; x++)
                    fprintf(csv, "bench,fp8,%d,kernel %d %s,%ld,%ld,%ld,%ld,%.6f,%.4f\n", ks[x]->id, ks[x]->id, ks[x]->name, B,
                            H, N, D, ms[x], tf[x]);
                fprintf(csv, "bench,fp16,14,kernel 14 fp16,%ld,%ld,%ld,%ld,%.6f,%.4f\n", B, H, N, D, ms[nk], tf[nk]);
                fprintf(csv, "quantize,fp8,-2,quantize Q and K per block,%ld,%ld,%ld,%ld,%.6f,0\n", B, H, N, D, qb_ms);
                fprintf(csv, "quantize,fp8,-3,quantize Q and K per block + Hadamard,%ld,%ld,%ld,%ld,%.6f,0\n", B, H, N, D, qh_ms);
            }
        }
    }
    return EXIT_OK;
}

/* make sanitize: each FP8 kernel once at N = 65 and 257, D = 64 and 128, causal (O in bf16) and not (fp16); the quantizer. */
static int fp8_sanitize(long only)
{
    const char *why = fp8_unavailable();
    if (why) { printf("%s\n", why); return EXIT_OK; }
    for (long D = 64; D <= 128; D *= 2)
        for (long N = 65; N <= 257; N += 192)
            for (int causal = 0; causal < 2; causal++) {
                const size_t n = (size_t)2 * N * D;
                float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V"), *out = xmalloc(n * 4, "O");
                make_qkv(q, k, v, n, 11);
                Fp8Tensors t;
                if (fp8_quantize(q, k, v, 1, 2, N, D, FP8_BLOCK, &t) != 0) return EXIT_FAIL;
                t.out = causal ? DT_BF16 : DT_FP16;                /* both stores: O in bf16 in the causal runs */
                Fp8Dev d;
                dev_upload(&t, causal, &d);
                for (int x = 0; x < fp8_count(); x++) {
                    if (only && fp8_at(x)->id != only) continue;
                    if (dev_run(fp8_at(x), &d, out) != 0) return EXIT_FAIL;
                    printf("ran kernel %d fp8 N=%ld D=%ld%s\n", fp8_at(x)->id, N, D, causal ? " causal, O in bf16" : "");
                }
                dev_free(&d);
                fp8_free(&t);
                tfree(q); tfree(k); tfree(v); tfree(out);
            }
    for (long D = 64; D <= 128; D *= 2)                    /* the quantizer: a partial block at N = 65, both modes */
        for (int had = 0; had < 2; had++) {
            const long N = 65;
            const size_t n = (size_t)2 * N * D;
            float *x = xmalloc(n * 4, "Q");
            Rng r;
            rng_seed(&r, 12);
            fill_normal(x, n, &r);
            void *dx = dupload(x, n, DT_FP16, "Q");
            uint8_t *d8 = dmalloc(n, "e4m3 codes");
            float *ds = dmalloc(2 * 2 * 4, "scales");
            for (long rows = FP8_QBLOCK; rows <= FP8_KBLOCK; rows *= 2) {
                if (fp8_quantize_gpu(dx, 2, N, D, rows, had, d8, ds, NULL) != 0) return EXIT_FAIL;
                gpu_sync_check();
                printf("ran fp8_quantize_gpu N=%ld D=%ld rows=%ld%s\n", N, D, rows, had ? " Hadamard" : "");
            }
            dfree(dx); dfree(d8); dfree(ds);
            tfree(x);
        }
    return EXIT_OK;
}
#endif

/* ------------------------------------------------------------ ./step05 --dtype fp8 */

void fp8_checks(long only)
{
    fp8_cpu_checks();
#ifdef HAVE_CUDA
    if (gpu_available()) { fp8_gpu_checks(only); return; }
#else
    (void)only;
#endif
    report_skip("fp8-kernels", "no CUDA device (or no CUDA in this build): the FP8 kernels' checks need one; the CPU half ran");
}

#ifdef HAVE_CUDA
/* The default run: one shape (--batch --heads --seq --dim), each FP8 kernel checked on sampled rows of every
 * head against float64 (tolerance: twice naive FP8's error on the same rows), then all timed, interleaved, beside
 * kernel 14 in fp16. */
static int fp8_default(const Opts *o, FILE *csv)
{
    const long B = o->B, H = o->H, N = o->N, D = o->D, bh = B * H;
    const size_t n = (size_t)bh * N * D;
    printf("step05 --dtype fp8: the FP8 kernels (Q, K, V in e4m3, per-block scales) vs float64 and vs kernel 14 in fp16, "
           "B=%ld H=%ld N=%ld D=%ld%s\ndevice: %s\n", B, H, N, D, o->causal ? ", causal" : "", gpu_describe());
    const char *why = fp8_unavailable();
    if (why) { printf("%s\n", why); return EXIT_SKIP; }
    const Fp8Kernel *ks[N_FP8_KERNELS];
    const int nk = select_kernels(o->kernel, ks);
    float *q = xmalloc(n * 4, "Q"), *k = xmalloc(n * 4, "K"), *v = xmalloc(n * 4, "V"), *out = xmalloc(n * 4, "O");
    make_qkv(q, k, v, n, o->seed);
    Fp8Tensors t;
    if (fp8_quantize(q, k, v, B, H, N, D, FP8_BLOCK, &t) != 0) return EXIT_FAIL;
    enum { NR = 24 };                                         /* rows 0, 1, N/2, N-1 and 20 drawn from the seed */
    long rows[NR];
    Rng r;
    rng_seed(&r, o->seed + 99);
    for (int i = 0; i < NR; i++) rows[i] = i == 0 ? 0 : i == 1 ? (N > 1) : i == 2 ? N / 2 : i == 3 ? N - 1 : (long)(rng_uniform(&r) * N);
    float *nv = xmalloc((size_t)bh * NR * D * 4, "naive rows"), *got = xmalloc((size_t)bh * NR * D * 4, "kernel rows");
    double *ref = xmalloc((size_t)bh * NR * D * 8, "reference rows"), *scr = xmalloc((size_t)N * 8, "scratch");
    naive_rows(&t, o->causal, rows, NR, nv);
    for (long h = 0; h < bh; h++)
        for (int i = 0; i < NR; i++) {
            const size_t off = (size_t)h * N * D;
            ref_attention_row(q + off, k + off, v + off, N, D, o->causal, rows[i], scr, ref + ((size_t)h * NR + i) * D);
        }
    double nmax, nrms;
    err_of(nv, ref, (size_t)bh * NR * D, &nmax, &nrms);
    const double tol = tol_fp8(nmax);
    Fp8Dev d;
    dev_upload(&t, o->causal, &d);
    int ok = 1;
    for (int x = 0; x < nk; x++) {
        char desc[200], eb[128];
        ks[x]->describe(D, desc, sizeof desc);
        if (dev_run(ks[x], &d, out) != 0) return EXIT_FAIL;
        for (long h = 0; h < bh; h++)
            for (int i = 0; i < NR; i++)
                memcpy(got + ((size_t)h * NR + i) * D, out + (size_t)h * N * D + (size_t)rows[i] * D, (size_t)D * 4);
        const Err e = compare(got, ref, (size_t)bh * NR * D, tol, 0);
        const int good = e.n_bad == 0 && e.max_abs <= tol;
        ok &= good;
        printf("kernel %d (%s): %s\n  check (%d rows of each head against float64): %s; naive fp8 %.2e on the same rows, "
               "tol %.2e: %s\n", ks[x]->id, ks[x]->name, desc, NR, fmt_err(&e, eb, sizeof eb), nmax, tol, good ? "ok" : "WRONG");
    }
    double tf[N_FP8_KERNELS + 1], ms[N_FP8_KERNELS + 1];
    const int trc = time_shape(o, q, k, v, &d, ks, nk, tf, ms);   /* the inputs just checked */
    dev_free(&d);
    fp8_free(&t);
    tfree(q); tfree(k); tfree(v); tfree(out); tfree(nv); tfree(got); tfree(ref); tfree(scr);
    if (trc != 0) return EXIT_FAIL;
    for (int x = 0; x < nk; x++) {
        printf("kernel %d fp8: %.3f ms, %.1f TFLOP/s", ks[x]->id, ms[x], tf[x]);
        if (tf[nk] > 0) printf(" (%.2fx kernel 14 in fp16)", tf[x] / tf[nk]);
        printf("\n");
        if (csv) fprintf(csv, "default,fp8,%d,kernel %d %s,%ld,%ld,%ld,%ld,%.6f,%.4f\n", ks[x]->id, ks[x]->id, ks[x]->name, B, H, N, D,
                         ms[x], tf[x]);
    }
    if (tf[nk] > 0) {
        printf("kernel 14 fp16: %.3f ms, %.1f TFLOP/s (median of %ld, interleaved, on the same inputs)\n", ms[nk], tf[nk],
               o->repeat);
        if (csv) fprintf(csv, "default,fp16,14,kernel 14 fp16,%ld,%ld,%ld,%ld,%.6f,%.4f\n", B, H, N, D, ms[nk], tf[nk]);
    }
    return ok ? EXIT_OK : EXIT_FAIL;
}
#endif

#ifdef HAVE_CUDA
/* The GPU half of --dtype fp8 on the reader's tensors: kernels 15-17 and 24 on them, quantised in `scaling` as the CPU
 * loop was, each against float64 over every element (tolerance: twice naive FP8's error on the same e4m3
 * tensors, the checks' rule) and beside the loop they transcribe. keep (may be NULL): O of the last kernel that
 * ran. Returns 1 if every kernel that ran was within the tolerance; *ran gets how many ran. */
static int fp8_files_gpu(const Opts *o, const float *q, const float *k, const float *v, int scaling, float *keep, int *ran)
{
    const long B = o->B, H = o->H, N = o->N, D = o->D;
    const size_t n = (size_t)B * H * N * D;
    *ran = 0;
    const char *why = fp8_unavailable();
    if (why) { printf("kernels 15-17 and 24 SKIP on this GPU: %s\n", why); return 1; }
    gpu_refusals_quiet(1); /* a refused launch: a SKIP line below */
    double *ref = xmalloc(n * 8, "reference");
    float *nv = xmalloc(n * 4, "naive fp8 O"), *cpu = xmalloc(n * 4, "the loop's O"), *out = xmalloc(n * 4, "O");
    ref_attention(q, k, v, B * H, N, D, o->causal, ref);
    Fp8Tensors t;
    if (fp8_quantize(q, k, v, B, H, N, D, (Fp8Mode)scaling, &t) != 0) exit(EXIT_FAIL);
    fp8_naive_cpu(&t, o->causal, nv);
    fp8_flash_cpu(&t, o->causal, cpu);
    double nmax, nrms, cmax, crms;
    err_of(nv, ref, n, &nmax, &nrms);
    err_of(cpu, ref, n, &cmax, &crms);
    const double tol = tol_fp8(nmax);
    printf("on the GPU, %s scaling, every element against float64 (tolerance: twice naive FP8's %.2e, %.2e):\n"
           "  the CPU loop               RMS %.2e  max abs %.2e\n", fp8_mode_name((Fp8Mode)scaling), nmax, tol, crms, cmax);
    Fp8Dev d;
    dev_upload(&t, o->causal, &d);
    int ok = 1;
    for (int x = 0; x < fp8_count(); x++) {
        const Fp8Kernel *kn = fp8_at(x);
        if (dev_run(kn, &d, out) != 0) { printf("  kernel %d %-17s SKIP: %s\n", kn->id, kn->name, gpu_last_refusal()); continue; }
        const Err e = compare(out, ref, n, tol, 0);
        double kmax, krms;
        err_of(out, ref, n, &kmax, &krms);
        const int good = e.n_bad == 0 && e.max_abs <= tol;
        ok &= good;
        printf("  kernel %d %-17s RMS %.2e  max abs %.2e  %s\n", kn->id, kn->name, krms, kmax, good ? "ok" : "WRONG");
        if (keep) memcpy(keep, out, n * 4);
        (*ran)++;
    }
    dev_free(&d);
    fp8_free(&t);
    tfree(ref); tfree(nv); tfree(cpu); tfree(out);
    return ok;
}
#endif

/* --dtype fp8 --q --k --v FILE.npy: FP8's error on the reader's own tensors, the error table's columns for them
 * (fp16 storage; the loop that kernels 15-17 and 24 transcribe, fp8_flash_cpu, in each scaling) against float64, on the
 * CPU, so that a laptop reader sees where their activations' outliers put FP8; where a GPU runs them, kernels
 * 15-17 and 24 on the same tensors (fp8_files_gpu). --out writes O (float32 [B, H, N, D]) of the last kernel that ran,
 * or of the CPU loop in --scaling's run. O(N^2 D) per head five times over: a few seconds at N = 1024. */
static int fp8_files(const Opts *o, int scaling, int print)
{
    float *q, *k, *v;
    Opts in = *o;
    inputs_load_or_make(&in, &q, &k, &v);                      /* exits 2 on a NaN or inf, naming the file */
    const size_t n = (size_t)o->B * o->H * o->N * o->D;
    float *out = o->outfile ? xmalloc(n * 4, "O") : NULL;
    if (print)
        printf("step05 --dtype fp8 on --q %s --k %s --v %s: [B, H, N, D] = [%ld, %ld, %ld, %ld]%s; the CPU loop that "
               "kernels 15-17 and 24 transcribe (fp8_flash_cpu), in each scaling, against float64\n", o->qfile, o->kfile, o->vfile,
               o->B, o->H, o->N, o->D, o->causal ? ", causal" : "");
    const ErrRow r = errors_of(q, k, v, o->B, o->H, o->N, o->D, o->causal, scaling, out);
    char c[4][32];
    snprintf(c[0], 32, "%.2e (%.1e)", r.fp16_rms, r.fp16_max);
    for (int m = 0; m < 3; m++) snprintf(c[m + 1], 32, "%.2e (%.1e)", r.rms[m], r.max[m]);
    int best = 0;
    for (int m = 1; m < 3; m++) best = r.rms[m] < r.rms[best] ? m : best;
    if (print) {
        printf("%-8s %-19s %-19s %-19s %-19s\n", "max|s|", "fp16 storage", "fp8 per-tensor", "fp8 per-block",
               "fp8 block+Hadamard");
        printf("%-8.1f %-19s %-19s %-19s %-19s\n(RMS error, max abs in parentheses; max|s|: the largest score a row sees)\n",
               r.max_score, c[0], c[1], c[2], c[3]);
        printf("answer: on these tensors FP8 (%s scaling) has %.1fx fp16 storage's RMS error; the smallest of the three "
               "scalings here is %s (%.2e)\n", fp8_mode_name((Fp8Mode)scaling), r.rms[scaling] / r.fp16_rms,
               fp8_mode_name((Fp8Mode)best), r.rms[best]);
    }
    int rc = EXIT_OK, ran = 0;
#ifdef HAVE_CUDA
    if (print && gpu_available() && !fp8_files_gpu(o, q, k, v, scaling, out, &ran)) rc = EXIT_FAIL;
#endif
    if (out) {
        const long shp[4] = {o->B, o->H, o->N, o->D};
        if (npy_save(o->outfile, out, shp, 4, DT_FP32) != 0) {
            fprintf(stderr, "step05: cannot write %s\n", o->outfile);
            rc = EXIT_FAIL;
        } else if (print) {
            printf("wrote O of %s (%s scaling) to %s (float32 [%ld, %ld, %ld, %ld])\n", ran ? "the last FP8 kernel that ran"
                   : "the CPU loop", fp8_mode_name((Fp8Mode)scaling), o->outfile, o->B, o->H, o->N, o->D);
        }
    }
    if (print && !ran) printf("(kernels 15-17 and 24 run on these tensors where a Hopper GPU is: sm_90a)\n");
    tfree(q); tfree(k); tfree(v); tfree(out);
    return rc;
}

int fp8_main(const Opts *o, int bench, int errors, int sanitize, int scaling)
{
    if (o->qfile) return fp8_files(o, scaling, 1);
    if (o->check) {
        fp8_checks(o->kernel);
        return report_finish();
    }
    if (errors) {                                             /* the CPU's table: no GPU needed */
        FILE *csv = o->csv ? csv_open(o->csv, "inputs,N,D,causal,fp16_rms,fp16_max,tensor_rms,tensor_max,block_rms,"
                                              "block_max,hadamard_rms,hadamard_max,max_score") : NULL;
        error_table(2, 1024, 1, csv);
        if (csv) fclose(csv);
        break_table();
        return EXIT_OK;
    }
    if (!sanitize && !gpu_available())
        printf("step05 --dtype fp8 runs kernels 15, 16, 17 and 24 on an H100 (sm_90a); this machine has no usable GPU. What runs here: "
               "./step05 --dtype fp8 --errors (the error table) and --check (the CPU half).\n");
    gpu_require();
#ifdef HAVE_CUDA
    if (sanitize) return fp8_sanitize(o->kernel);
    FILE *csv = o->csv ? csv_open(o->csv, "mode,dtype,kernel,name,B,H,N,D,ms,tflops") : NULL;
    const int rc = bench ? fp8_bench(o, csv) : fp8_default(o, csv);
    if (csv) fclose(csv);
    return rc;
#else
    (void)bench;
    return EXIT_SKIP;
#endif
}
