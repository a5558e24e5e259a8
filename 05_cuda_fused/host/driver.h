/*
 * driver.h: the plumbing that step 05's forward (main.c) and backward (backward.c) share, so that each of
 * them reads as what it checks, times and answers: one problem on the device, the reference's rows, the
 * kernel lists behind --kernel, the SKIP lines of kernels this GPU cannot run, the time rows, the answer
 * line, the benchmark's table and the CSV (driver.c). Nothing here knows a kernel's algorithm.
 */
#ifndef DRIVER_H
#define DRIVER_H

#include <stdio.h>

#include "common.h"
#include "../kernels.h"

/* The self-test grid's sequence lengths, forward and backward alike: N = 1, a tile's edges (63, 64, 65),
 * N not a multiple of any tile (17, 257, 1000, 1025). */
#define CHECK_NS {1, 2, 17, 63, 64, 65, 257, 1000, 1025}
enum { N_CHECK_NS = 9 };

/* --bench's shapes, FlashAttention's: N = 512 .. 16384 (6 columns), batch = 16384 / N, heads = 2048 / D. */
enum { BENCH_N0 = 512, BENCH_N1 = 16384, BENCH_COLS = 6 };

// --- one problem ------------------------------------------------------------------------------

typedef struct {
    long B, H, N, D;
    int dtype, causal;
    size_t n;                   /* B H N D */
    float *q, *k, *v;           /* host, rounded to dtype */
    void *Q, *K, *V, *O;        /* device, dtype, [B, H, N, D] */
    /* the backward's (problem_add_backward), NULL for the forward's problems: */
    float *dout;                /* host dO = dLoss/dO, rounded to dtype */
    void *dO, *dQ, *dK, *dV;    /* device, dtype */
    float *L;                   /* device [B, H, N] fp32, NULL until problem_need_L */
} Problem;

/* Q, K, V from the seed (o != NULL with --q/--k/--v: from the files, which set the shape), rounded to
 * dtype, uploaded; O allocated on the device. */
void problem_make(Problem *p, long B, long H, long N, long D, int dtype, int causal, uint64_t seed, const Opts *o);
/* dO from the seed's fourth stream (seed + 3; make_qkv takes seed .. seed + 2), or the given host dout
 * (p->n floats, tracked; the problem takes it), rounded and uploaded; dQ, dK, dV allocated. */
void problem_add_backward(Problem *p, uint64_t seed, float *dout);
void problem_need_L(Problem *p);
void problem_free(Problem *p);

/* Naive attention's S and P, [B, H, N, N] of p's dtype each, from the tracked allocator (as a caching
 * allocator hands them to the timed code): 0, or -1 with both NULL when they do not fit. */
int naive_buffers(const Problem *p, void **S, void **P);

/* The rows compared with the float64 reference: every row up to N = 2048, every 61st row of every head
 * beyond (the reference costs O(N D) per row on the CPU). */
long ref_stride(long N);
/* Download the device tensor dev ([B, H, N, D] of p's dtype) into full (p->n floats), and copy the rows
 * 0, stride, 2 stride, ... of every head into rows. */
void gather_rows(const Problem *p, long stride, const void *dev, float *full, float *rows);

/* dev against ref's rows (gather_rows, then compare): fp32 within atol + 1e-5 relative, 16-bit within atol. */
Err compare_rows(const Problem *p, long stride, const void *dev, const double *ref, size_t nrows, double atol, float *full,
                 float *rows);

/* The forward's reference: the float64 rows of ref_stride, with ALiBi's -slope[x] |i - j| on head x's
 * scores (slope: host [B*H], NULL for none), computed once per problem. */
typedef struct { long stride; size_t nrows; double *ref; } RefRows;
RefRows ref_rows(const Problem *p, const float *slope);
/* Run forward kernel kn (naive attention when kn is NULL; kn's launch_alibi when slope_d, device [B*H], is
 * given) once on a poisoned O and compare its rows with r's (atol: the caller's tol_fp32 or tol_16bit of
 * naive's error); full gets the whole output. 0, or the launch's refusal (-1, its line printed). */
int run_compare(const FusedKernel *kn, Problem *p, const RefRows *r, double atol, Err *e, float *full,
                const float *slope_d);

/* 4 B H N^2 D, FlashAttention's convention for the forward (half of it causal). */
double attn_flops(long B, long H, long N, long D, int causal);

// --- the kernel lists -------------------------------------------------------------------------

/* What the forward's FusedKernel and the backward's BackwardKernel have in common: enough to validate
 * --kernel, to say which kernels run a case, and to skip the ones this GPU cannot run. */
typedef struct {
    int id;
    unsigned dtypes;
    int (*supports_dim)(long D);
    const char *(*unavailable)(void); /* NULL, or the kernel's: asked only on a GPU (it queries the device) */
} KernelInfo;

enum { MAX_LISTED = 32 };
/* The forward's (backward = 0) or the backward's registered kernels in id order, at most MAX_LISTED. */
int kernel_list(int backward, KernelInfo *out);
/* "kernel 3" or "bwd 3": the label of the tables. */
const char *kernel_label(int backward, int id, char *buf, size_t n);
/* The kernel runs dtype at D on this GPU. */
int fused_runs(const FusedKernel *kn, int dtype, long D);
int bwd_runs(const BackwardKernel *kb, int dtype, long D);
/* --kernel K[-M] names kernels that exist, and one of them runs o's dtype and D (every dtype and D with
 * any_case: --sanitize-shapes; only the dtype with any_dim: --bench, --check); else one line, exit 2. */
void kernel_option_check(const Opts *o, int backward, int any_case, int any_dim);
/* --check: one SKIP line per kernel (of --kernel, 0 for all) this GPU cannot run, then silence. */
void report_unavailable(int backward, long only);

// --- the tables and the CSV -------------------------------------------------------------------

#define CSV_HEADER "mode,dtype,kernel,name,B,H,N,D,causal,ms,tflops,peak_bytes,max_abs,rel_l2"
/* One CSV row of p's shape; err = {max abs, rel L2}, or NULL when not measured (written as 0). */
void csv_row(FILE *f, const char *mode, const Problem *p, int id, const char *name, double ms, double tflops,
             size_t peak, const double *err);
/* "  kernel 3  mma   1.234 ms  123.45 TFLOP/s  peak  1.2 MB  2.00x naive", the times vs naive's when
 * t_naive > 0; then desc (the kernel's tiles and launch) on a line of its own when not NULL. */
void print_time_row(const char *label, const char *name, double ms, double tflops, size_t peak, double t_naive,
                    const char *desc);
/* "answer: the fastest fused <what> here (kernel K, name) takes ... vs naive's ...: Nx, and needs no
 * [B,H,N,N] buffer (naive's <buffers>: bytes)". */
void print_answer_fastest(const char *what, int id, const char *name, double ms, double t_naive, const char *buffers,
                          double bytes);
/* --bench's table at head dim D: a row per method (row 0 naive, row r > 0 the kernel ids[r] of the forward
 * or the backward) that has[r], TFLOP/s per N column from t[r][col] ms (< 0: OOM) and flops_per_n * N FLOPs. */
void print_bench_table(int backward, long D, double flops_per_n, const int *ids, int rows, const double (*t)[BENCH_COLS],
                       const int *have);

#endif
