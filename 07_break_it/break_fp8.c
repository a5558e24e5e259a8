/*
 * break_fp8.c: break it in FP8 (break_fp8.h). The running max keeps every p = e^(s - m) in [0, 1], which is what
 * lets step 05's FP8 kernels store P in e4m3 with no scale of its own (as 2^8 p). Break that order and store the
 * scores S in e4m3 before the max is subtracted, as a kernel that kept S in FP8 to save registers or memory would:
 * e4m3 keeps 3 bits of mantissa, so S rounds by 2^-4 of itself, and past 448 every score saturates to the same
 * value. The table grows the scores (Q scaled by c) and measures both against float64, everything else exact. The
 * e4m3 rounding is step 05's own (05_cuda_fused/fp8/fp8.c, the one its kernels are checked against).
 */
#include "common.h"
#include "break_fp8.h"
#include "../05_cuda_fused/fp8/fp8.h"

#include <math.h>
#include <stdio.h>

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

void break_fp8_table(void)
{
    printf("break it in FP8: what the running max protects (one head, N = 256, D = 64, Q scaled by c; all else exact, one "
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
