/*
 * driver.c: step 05's plumbing, shared by the forward (main.c) and the backward (backward.c): see
 * driver.h. The kernel lists and the option check work without a GPU too (a build without CUDA has
 * empty lists); the problem lives on the device.
 */
#include "common.h"
#include "driver.h"
#include "gpu.h"
#include "../../01_naive/naive.h"

#include <string.h>

// --- the kernel lists -------------------------------------------------------------------------

#ifdef HAVE_CUDA
int fused_runs(const FusedKernel *kn, int dtype, long D)
{
    return (kn->dtypes & (1u << dtype)) && kn->supports_dim(D) && !FUSED_UNAVAILABLE(kn) && !gpu_dtype_unavailable(dtype);
}

int bwd_runs(const BackwardKernel *kb, int dtype, long D)
{
    return (kb->dtypes & (1u << dtype)) && kb->supports_dim(D) && !BWD_UNAVAILABLE(kb) && !gpu_dtype_unavailable(dtype);
}

int kernel_list(int backward, KernelInfo *out)
{
    int n, m = 0;
    if (backward) {
        const BackwardKernel *const *bs = bwd_kernels(&n);
        for (int i = 0; i < n && m < MAX_LISTED; i++, m++)
            out[m] = (KernelInfo){bs[i]->id, bs[i]->dtypes, bs[i]->supports_dim, bs[i]->unavailable};
    } else {
        const FusedKernel *const *ks = fused_kernels(&n);
        for (int i = 0; i < n && m < MAX_LISTED; i++, m++)
            out[m] = (KernelInfo){ks[i]->id, ks[i]->dtypes, ks[i]->supports_dim, ks[i]->unavailable};
    }
    return m;
}
#else
int kernel_list(int backward, KernelInfo *out) { (void)backward, (void)out; return 0; }
#endif

const char *kernel_label(int backward, int id, char *buf, size_t n)
{
    snprintf(buf, n, "%s %d", backward ? "bwd" : "kernel", id);
    return buf;
}

static const KernelInfo *find(const KernelInfo *ks, int n, int id)
{
    for (int i = 0; i < n; i++)
        if (ks[i].id == id) return &ks[i];
    return NULL;
}

void kernel_option_check(const Opts *o, int backward, int any_case, int any_dim)
{
    KernelInfo ks[MAX_LISTED];
    const int n = kernel_list(backward, ks);
    const char *what = backward ? "backward kernel" : "kernel";
    int any = 0;
    if (o->kernel && (!find(ks, n, (int)o->kernel) || !find(ks, n, (int)o->kernel_last)))
        usage_error("option --kernel: there is no %s %ld (%ss 1..%d)", what,
                    find(ks, n, (int)o->kernel) ? o->kernel_last : o->kernel, what, n ? ks[n - 1].id : 0);
    for (int i = 0; i < n; i++)
        any |= opts_kernel(o, ks[i].id) &&
               (any_case || ((ks[i].dtypes & (1u << o->dtype)) && (any_dim || ks[i].supports_dim(o->D))));
    if (!any && !o->check)
        usage_error("option --dtype/--dim/--kernel: no %s runs %s at D=%ld%s", what, dtype_name(o->dtype), o->D,
                    o->kernel ? " with that --kernel" : "");
}

void report_unavailable(int backward, long only)
{
    KernelInfo ks[MAX_LISTED];
    const int n = kernel_list(backward, ks);
    char name[32];
    for (int i = 0; i < n; i++)
        if ((!only || ks[i].id == only) && ks[i].unavailable && ks[i].unavailable()) {
            snprintf(name, sizeof name, "%s%d", backward ? "bwd" : "kernel", ks[i].id);
            report_skip(name, "%s", ks[i].unavailable());
        }
}

// --- the tables and the CSV -------------------------------------------------------------------

double attn_flops(long B, long H, long N, long D, int causal)
{
    const double f = 4.0 * B * H * N * N * D;
    return causal ? f / 2 : f;
}

void csv_row(FILE *f, const char *mode, const Problem *p, int id, const char *name, double ms, double tflops,
             size_t peak, const double *err)
{
    fprintf(f, "%s,%s,%d,%s,%ld,%ld,%ld,%ld,%d,%.6f,%.4f,%zu,", mode, dtype_name(p->dtype), id, name, p->B, p->H, p->N,
            p->D, p->causal, ms, tflops, peak);
    if (err) fprintf(f, "%.3e,%.3e\n", err[0], err[1]);
    else fprintf(f, "0,0\n");
}

void print_time_row(const char *label, const char *name, double ms, double tflops, size_t peak, double t_naive,
                    const char *desc)
{
    char b[32];
    printf("  %-9s %-16s %9.3f ms %8.2f TFLOP/s  peak %10s", label, name, ms, tflops, fmt_bytes((double)peak, b, sizeof b));
    if (t_naive > 0) printf("  %.2fx naive", t_naive / ms);
    printf("\n");
    if (desc) printf("            %s\n", desc);
}

void print_answer_fastest(const char *what, int id, const char *name, double ms, double t_naive, const char *buffers,
                          double bytes)
{
    char b[32];
    printf("\nanswer: the fastest %s here (kernel %d, %s) takes %.3f ms vs naive's %.3f ms: %.2fx, and needs no "
           "[B,H,N,N] buffer (naive's %s: %s)\n", what, id, name, ms, t_naive, t_naive / ms, buffers,
           fmt_bytes(bytes, b, sizeof b));
}

void print_bench_table(int backward, long D, double flops_per_n, const int *ids, int rows, const double (*t)[BENCH_COLS],
                       const int *have)
{
    printf("\n D=%ld       N:", D);
    for (long N = BENCH_N0; N <= BENCH_N1; N *= 2) printf(" %7ld", N);
    printf("\n");
    for (int r = 0; r < rows; r++) {
        if (!have[r]) continue;
        char label[48];
        if (r == 0) snprintf(label, sizeof label, "naive");
        else kernel_label(backward, ids[r], label, sizeof label);
        printf(" %-14s", label);
        int c = 0;
        for (long N = BENCH_N0; N <= BENCH_N1; N *= 2, c++) {
            if (t[r][c] < 0) printf(" %7s", "OOM");
            else printf(" %7.1f", flops_per_n * N / t[r][c] / 1e9);
        }
        printf("\n");
    }
}

// --- one problem ------------------------------------------------------------------------------

long ref_stride(long N) { return N <= 2048 ? 1 : 61; }

#ifdef HAVE_CUDA
void problem_make(Problem *p, long B, long H, long N, long D, int dtype, int causal, uint64_t seed, const Opts *o)
{
    memset(p, 0, sizeof *p);
    p->B = B, p->H = H, p->N = N, p->D = D, p->dtype = dtype, p->causal = causal;
    p->n = (size_t)B * H * N * D;
    if (o && o->qfile) {
        Opts oo = *o;
        inputs_load_or_make(&oo, &p->q, &p->k, &p->v);
    } else {
        p->q = xmalloc(p->n * 4, "Q"), p->k = xmalloc(p->n * 4, "K"), p->v = xmalloc(p->n * 4, "V");
        make_qkv(p->q, p->k, p->v, p->n, seed);
    }
    round_to_dtype(p->q, p->n, dtype), round_to_dtype(p->k, p->n, dtype), round_to_dtype(p->v, p->n, dtype);
    p->Q = dupload(p->q, p->n, dtype, "Q"), p->K = dupload(p->k, p->n, dtype, "K"), p->V = dupload(p->v, p->n, dtype, "V");
    p->O = dmalloc(p->n * dtype_size(dtype), "O");
}

void problem_add_backward(Problem *p, uint64_t seed, float *dout)
{
    if (dout) {
        p->dout = dout;
    } else {
        Rng r;
        rng_seed(&r, seed + 3);
        p->dout = xmalloc(p->n * 4, "dO");
        fill_normal(p->dout, p->n, &r);
    }
    round_to_dtype(p->dout, p->n, p->dtype);
    p->dO = dupload(p->dout, p->n, p->dtype, "dO");
    const size_t bytes = p->n * dtype_size(p->dtype);
    p->dQ = dmalloc(bytes, "dQ"), p->dK = dmalloc(bytes, "dK"), p->dV = dmalloc(bytes, "dV");
}

int naive_buffers(const Problem *p, void **S, void **P)
{
    const size_t nn = (size_t)p->B * p->H * p->N * p->N * dtype_size(p->dtype);
    *S = dmalloc_try(nn);
    *P = *S ? dmalloc_try(nn) : NULL;
    if (*P) return 0;
    dfree(*S);
    *S = NULL;
    return -1;
}

void problem_need_L(Problem *p)
{
    if (!p->L) p->L = dmalloc((size_t)p->B * p->H * p->N * sizeof(float), "L");
}

void problem_free(Problem *p)
{
    dfree(p->Q), dfree(p->K), dfree(p->V), dfree(p->O), dfree(p->L);
    dfree(p->dO), dfree(p->dQ), dfree(p->dK), dfree(p->dV);
    tfree(p->q), tfree(p->k), tfree(p->v), tfree(p->dout);
}

void gather_rows(const Problem *p, long stride, const void *dev, float *full, float *rows)
{
    ddownload(full, dev, p->n, p->dtype);
    size_t w = 0;
    for (long h = 0; h < p->B * p->H; h++)
        for (long i = 0; i < p->N; i += stride, w++)
            memcpy(rows + w * p->D, full + ((size_t)h * p->N + i) * p->D, (size_t)p->D * 4);
}

Err compare_rows(const Problem *p, long stride, const void *dev, const double *ref, size_t nrows, double atol, float *full,
                 float *rows)
{
    gather_rows(p, stride, dev, full, rows);
    return compare(rows, ref, nrows * p->D, atol, p->dtype == DT_FP32 ? 1e-5 : 0);
}

RefRows ref_rows(const Problem *p, const float *slope)
{
    RefRows r;
    r.stride = ref_stride(p->N);
    long per_head = (p->N + r.stride - 1) / r.stride;
    r.nrows = (size_t)p->B * p->H * per_head;
    r.ref = xmalloc(r.nrows * p->D * sizeof(double), "reference rows");
    double *scratch = xmalloc((size_t)p->N * sizeof(double), "reference scores");
    size_t w = 0;
    for (long h = 0; h < p->B * p->H; h++)
        for (long i = 0; i < p->N; i += r.stride, w++) {
            size_t hd = (size_t)h * p->N * p->D;
            ref_attention_row_bias(p->q + hd, p->k + hd, p->v + hd, p->N, p->D, p->causal, i, slope ? slope[h] : 0.0,
                                   scratch, r.ref + w * p->D);
        }
    tfree(scratch);
    return r;
}

int run_compare(const FusedKernel *kn, Problem *p, const RefRows *r, double atol, Err *e, float *full,
                const float *slope_d)
{
    dpoison(p->O, p->n, p->dtype);
    gpu_refusal_clear(); /* a failure below is a refusal only if this launch was refused (report_not_run) */
    int rc = slope_d ? kn->launch_alibi(p->Q, p->K, p->V, p->O, slope_d, p->B, p->H, p->N, p->D, p->dtype, p->causal, NULL)
           : kn ? kn->launch(p->Q, p->K, p->V, p->O, p->B, p->H, p->N, p->D, p->dtype, p->causal, NULL)
                : naive_attention_gpu(p->Q, p->K, p->V, p->O, p->B, p->H, p->N, p->D, p->dtype, p->causal, NULL);
    if (rc != 0) return rc;
    gpu_sync_check();
    float *got = xmalloc(r->nrows * p->D * 4, "sampled rows");
    *e = compare_rows(p, r->stride, p->O, r->ref, r->nrows, atol, full, got);
    tfree(got);
    return 0;
}
#endif
