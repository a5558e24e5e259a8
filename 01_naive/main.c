/*
 * step01: naive attention, the textbook formula with S and P materialised.
 *
 *   S = Q K^T / sqrt(D)     [B, H, N, N]   written whole
 *   P = softmax(S)          [B, H, N, N]   written whole (row-wise, stable)
 *   O = P V                 [B, H, N, D]
 *
 * This is the book's Step 1 and the attention of Chapter 4: nothing clever,
 * which is the point. S and P are the whole problem: 2*B*H*N*N floats, four
 * times larger each time N doubles. Every later step is checked against the
 * same float64 reference this one is.
 *
 * Run:   make step01 && ./step01                 (B=2 H=8 N=1024 D=64, fp32, CPU)
 *        ./step01 --seq 2048 --device cpu
 *        ./step01 --check                        (the self-test grid)
 * Expect (last lines):
 *        S and P: 2 x 67.1 MB ...
 *        error vs float64 reference: max abs ~1e-7, ...
 * Limits: the CPU path is single-threaded fp32 and slow at large N on purpose;
 *        the GPU path (cuBLAS + a softmax kernel, 01_naive/naive_gpu.cu) is the
 *        baseline the fused kernels of step 05 are measured against.
 */
#include "common.h"
#include "gpu.h"
#include "naive.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// --- checks -------------------------------------------------------------------

static void check_one(long B, long H, long N, long D, int causal, uint64_t seed)
{
    size_t n = (size_t)B * H * N * D;
    float *q, *k, *v, *o = xmalloc(n * sizeof(float), "O");
    double *ref = xmalloc(n * sizeof(double), "reference");
    char name[96], eb[128];
    q = xmalloc(n * sizeof(float), "Q"); k = xmalloc(n * sizeof(float), "K"); v = xmalloc(n * sizeof(float), "V");
    make_qkv(q, k, v, n, seed);
    for (size_t i = 0; i < n; i++) o[i] = NAN;  // poisoned: an unwritten element fails
    ref_attention(q, k, v, B * H, N, D, causal, ref);
    int rc = naive_attention_cpu(q, k, v, o, B * H, N, D, causal);
    Err e = compare(o, ref, n, 1e-5, 1e-5);
    snprintf(name, sizeof name, "naive-cpu B=%ld H=%ld N=%ld D=%ld%s", B, H, N, D, causal ? " causal" : "");
    report(rc == 0 && e.n_bad == 0, &e, name, "%s (tol 1e-5 abs + 1e-5 rel)", fmt_err(&e, eb, sizeof eb));
    tfree(q); tfree(k); tfree(v); tfree(o); tfree(ref);
}

static int run_checks(void)
{
    static const long Ns[] = {1, 2, 17, 64, 65, 257};
    static const long Ds[] = {16, 64};
    checker_selftest();
    for (size_t a = 0; a < sizeof Ns / sizeof *Ns; a++)
        for (size_t b = 0; b < sizeof Ds / sizeof *Ds; b++)
            check_one(2, 3, Ns[a], Ds[b], 0, 7 + a);
    check_one(1, 2, 65, 32, 1, 11);
    check_one(3, 1, 257, 64, 1, 12);
#ifdef HAVE_CUDA
    if (gpu_available()) return naive_gpu_checks();
    report_skip("naive-gpu", "no CUDA device");
#else
    report_skip("naive-gpu", "built without CUDA");
#endif
    return report_finish();
}

// --- main ---------------------------------------------------------------------

typedef struct { const float *q, *k, *v; float *o; long bh, N, D; int causal; } Run;
static void run_cpu(void *p)
{
    Run *r = p;
    if (naive_attention_cpu(r->q, r->k, r->v, r->o, r->bh, r->N, r->D, r->causal) != 0) {
        mem_oom_line(mem_refused(), "S or P ([B,H,N,N] floats each)");
        exit(EXIT_FAIL);
    }
}

static void usage(const Opts *o)
{
    printf("usage: ./step01 [options]\n"
           "Naive attention with S and P materialised as [B,H,N,N] (book Step 1).\n");
    print_common_usage(o);
}

int main(int argc, char **argv)
{
    Opts o;
    opts_expand(&argc, &argv);
    opts_init(&o, "step01", OPT_SHAPE | OPT_DTYPE | OPT_CAUSAL | OPT_SEED | OPT_REPEAT | OPT_CSV | OPT_CHECK |
                  OPT_NPY | OPT_DEVICE | OPT_GPU_AS, (1u << DT_FP32) | (1u << DT_FP16));
    o.repeat = 3;
    for (int i = 1; i < argc; i++)
        if (!opts_parse_common(&o, argc, argv, &i))
            usage_error("unknown option '%s' (see --help)", argv[i]);
    if (o.help) { usage(&o); return 0; }
    opts_validate(&o, sizeof(float));
    size_t nn = size_or_die("S and P: 2*B*H*N*N*sizeof(float)", 2, (size_t)o.B, (size_t)o.H, (size_t)o.N * o.N, sizeof(float));
    int gpu = o.device == DEV_GPU || (o.device == DEV_AUTO && gpu_available());
    if (gpu) opts_gpu_grid(&o, 1); /* the softmax kernel: a block per row */
    if (o.dtype != DT_FP32 && !gpu)
        usage_error("option --dtype: %s runs on the GPU path only (the CPU path is fp32); use --device gpu", dtype_name(o.dtype));
    if (o.check) return run_checks();
    if (gpu) {
#ifdef HAVE_CUDA
        gpu_require();
        return naive_gpu_main(&o);
#else
        gpu_require();
#endif
    }

    float *q, *k, *v;
    size_t n = (size_t)o.B * o.H * o.N * o.D;
    char b1[32], b2[32], b3[32], eb[128];
    inputs_load_or_make(&o, &q, &k, &v);
    float *out = xmalloc(n * sizeof(float), "O");
    printf("step01: naive attention on the CPU, fp32, B=%ld H=%ld N=%ld D=%ld%s\n", o.B, o.H, o.N, o.D, o.causal ? ", causal" : "");
    printf("S and P: 2 x %s = %s (2*B*H*N*N*4 bytes); Q, K, V, O: 4 x %s\n",
           fmt_bytes((double)nn / 2, b1, sizeof b1), fmt_bytes((double)nn, b2, sizeof b2),
           fmt_bytes((double)n * 4, b3, sizeof b3));

    Run r = {q, k, v, out, o.B * o.H, o.N, o.D, o.causal};
    mem_reset_peak();
    double t = time_median(run_cpu, &r, 1, (int)o.repeat);
    size_t peak = mem_peak();
    printf("time: %.3f ms (median of %ld after 1 warm-up), %.2f GFLOP/s (4*B*H*N*N*D / time)\n", t * 1e3, o.repeat,
           4.0 * o.B * o.H * o.N * o.N * o.D / t / 1e9);
    printf("peak tracked memory: %s (inputs, output and S, P); peak RSS %s\n", fmt_bytes((double)peak, b1, sizeof b1),
           fmt_bytes((double)rss_peak_bytes(), b2, sizeof b2));

    /* The reference costs O(B H N^2 D) in double: all rows up to N = 2048,
     * beyond that every 7th row of every head (a sample, said so). */
    long stride = o.N <= 2048 ? 1 : 7, rows = (o.N + stride - 1) / stride;
    double *ref = xmalloc((size_t)o.B * o.H * rows * o.D * sizeof(double), "reference");
    float *got = xmalloc((size_t)o.B * o.H * rows * o.D * sizeof(float), "sampled rows");
    double *scratch = xmalloc((size_t)o.N * sizeof(double), "reference scores");
    size_t w = 0;
    for (long h = 0; h < o.B * o.H; h++)
        for (long i = 0; i < o.N; i += stride, w++) {
            size_t hd = (size_t)h * o.N * o.D;
            ref_attention_row(q + hd, k + hd, v + hd, o.N, o.D, o.causal, i, scratch, ref + w * o.D);
            memcpy(got + w * o.D, out + hd + (size_t)i * o.D, (size_t)o.D * sizeof(float));
        }
    Err e = compare(got, ref, w * (size_t)o.D, 1e-5, 1e-5);
    printf("error vs float64 reference (%s): %s%s\n", stride == 1 ? "all rows" : "every 7th row",
           fmt_err(&e, eb, sizeof eb), e.n_bad ? "  <-- over 1e-5: WRONG" : "");
    if (o.outfile) {
        long shp[4] = {o.B, o.H, o.N, o.D};
        if (npy_save(o.outfile, out, shp, 4, DT_FP32) != 0) { fprintf(stderr, "step01: cannot write %s\n", o.outfile); return EXIT_FAIL; }
        printf("wrote O to %s\n", o.outfile);
    }
    if (o.csv) {
        FILE *f = csv_open(o.csv, "step,device,dtype,B,H,N,D,causal,ms,gflops,peak_bytes,sp_bytes,max_abs,rel_l2");
        fprintf(f, "01,cpu,fp32,%ld,%ld,%ld,%ld,%d,%.6f,%.4f,%zu,%zu,%.3e,%.3e\n", o.B, o.H, o.N, o.D, o.causal, t * 1e3,
                4.0 * o.B * o.H * o.N * o.N * o.D / t / 1e9, peak, nn, e.max_abs, e.rel_l2);
        fclose(f);
    }
    tfree(scratch); tfree(got); tfree(ref); tfree(out); tfree(q); tfree(k); tfree(v);
    return e.n_bad ? EXIT_FAIL : EXIT_OK;
}
