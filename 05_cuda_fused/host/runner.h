/*
 * runner.h: the one runner of step 05's four families (the forward, the backward, decode, FP8): what their
 * drivers do alike, written once (runner.c), so that each driver reads as its own science: what it checks,
 * times and answers. Here: one view of the four registries (the kernel lists behind --kernel, the SKIP lines
 * of kernels this GPU cannot run, the check grid's walk), the forward's and the backward's problem on the
 * device with its float64 reference rows, the time rows, the answer line, the --bench table, the CSV rows,
 * and the end of a sanitizer run. Nothing here knows a kernel's algorithm.
 */
#ifndef RUNNER_H
#define RUNNER_H

#include <stdio.h>

#include "common.h"
#include "../kernels.h"

// --- the kernel lists: one view of the four registries ------------------------------------------

typedef enum { FAM_FORWARD, FAM_BACKWARD, FAM_DECODE, FAM_FP8 } Family;

/* What every family's entry has, or has where it applies: enough to validate --kernel, to say which kernels
 * run a case, and to skip the ones this GPU cannot run. */
typedef struct {
    Family family;
    int id, extends;
    const char *name, *idea;
    unsigned dtypes;                   /* 1u << DT_* it accepts (FP8: 1u << DT_FP8) */
    int (*supports_dim)(long D);       /* NULL: the launch says (FP8: D = 64 or 128, a refusal otherwise) */
    const char *(*unavailable)(void);  /* NULL, or the kernel's: asked only on a GPU (it queries the device) */
    int persistent;                    /* one block per SM taking work from a counter (forward, backward) */
    const void *entry;                 /* the family's own: FusedKernel, BackwardKernel, DecodeKernel, Fp8Kernel */
} KernelInfo;

/* Family f's registered kernels in id order into out[MAX_KERNELS]; their count. A build without CUDA has none. */
int kernel_list(Family f, KernelInfo *out);
/* "kernel", "backward kernel", "decode kernel", "FP8 kernel": the words of --kernel's usage lines. */
const char *family_what(Family f);
/* "kernel 3", "bwd 3", "decode kernel 3", "kernel 15": the label of the tables. */
const char *kernel_label(Family f, int id, char *buf, size_t n);
/* "kernel3", "bwd3", "decode3", "kernel15": the start of the family's check names. */
const char *check_label(Family f, int id, char *buf, size_t n);
/* The ids of family f's kernels: "15-17, 24" or "15, 16, 17 and 24" (as kernel_ids_phrase), "" when none; their count. */
int kernel_ids_text(Family f, int ranges, const char *last_sep, char *buf, size_t n);
/* The ids of family f's kernels as a reader's phrase: "kernels 15-17, 24" (ranges: three ids or more in a row
 * as a-b; last_sep between the last two: ", " or " and "), "kernel 15", or, with none registered (a build
 * without CUDA), "the FP8 kernels". The lines that name a family's kernels take it from here. */
const char *kernel_ids_phrase(Family f, int ranges, const char *last_sep, char *buf, size_t n);

/* The GPU parts (HAVE_CUDA builds): they ask the device. A kernel accepting `dtypes`, built for D by supports_dim
 * (NULL: any), runs dtype at D on this GPU. */
int runs_case(unsigned dtypes, int (*supports_dim)(long D), const char *(*unavailable)(void), int dtype, long D);
int kernel_runs(const KernelInfo *k, int dtype, long D);
int fused_runs(const FusedKernel *kn, int dtype, long D);
int bwd_runs(const BackwardKernel *kb, int dtype, long D);
/* One of family f's kernels (only: --kernel's id, 0 for all) runs dtype at D on this GPU. */
int any_kernel_runs(Family f, long only, int dtype, long D);

/* --kernel K[-M] names kernels of family f that exist; else one line, exit 2. */
void kernel_option_exists(const Opts *o, Family f);
/* That, and one of them runs o's dtype and D (every dtype and D with any_case: --sanitize-shapes; only the
 * dtype with any_dim: --bench, --check); else one line, exit 2. Decidable without a GPU. */
void kernel_option_check(const Opts *o, Family f, int any_case, int any_dim);
/* --check: one SKIP line per kernel of family f (of --kernel, 0 for all) this GPU cannot run, then silence. */
void report_unavailable(Family f, long only);
/* --check: a SKIP line for dtype when this GPU has no such arithmetic (reason prefixed with tag, "" or
 * "backward: "); 1 if it said so (the caller skips the dtype). */
int report_dtype_unavailable(int dtype, const char *tag);

// --- the self-test grid ---------------------------------------------------------------------------

/* The self-test grid's sequence lengths, every family's: N = 1, a tile's edges (63, 64, 65), N not a multiple
 * of any tile (17, 257, 1000, 1025). */
#define CHECK_NS {1, 2, 17, 63, 64, 65, 257, 1000, 1025}
enum { N_CHECK_NS = 9 };

/* The grid's walk that the forward and the backward share: each dtype (a SKIP line where this GPU has none),
 * each of its head dims where a kernel of --kernel runs, each N of CHECK_NS, not causal then causal, one case
 * each (run_case: the family's problem, reference and kernels); after a head dim's N, after_dim (NULL: none)
 * adds the family's own cases. Decode's grid (cache lengths, heads, new rows) and FP8's (one dtype, its
 * availability said once) have other shapes and walk themselves. */
typedef struct {
    Family family;
    long only;                          /* --kernel's id, 0 for all */
    const char *skip_tag;               /* before a dtype's SKIP reason: "" or "backward: " */
    const long *dims[3];                /* the head dims of fp32, fp16, bf16 */
    int ndims[3];
    int causal_ns_only;                 /* 1: causal only at N = 1, 65, 1000 (the forward); 0: at every N */
    void (*run_case)(void *ctx, int dtype, int b, long D, int a, long N, int causal); /* b, a: the dim's, N's index */
    void (*after_dim)(void *ctx, int dtype, int b, long D);
    void *ctx;
} CheckGrid;
void check_grid(const CheckGrid *g);

// --- one problem (the forward's and the backward's) ------------------------------------------------

/* --bench's shapes, FlashAttention's: N = 512 .. 16384 (6 columns), batch = 16384 / N, heads = 2048 / D. */
enum { BENCH_N0 = 512, BENCH_N1 = 16384, BENCH_COLS = 6 };
/* The last N a --bench runs: 16384, or --seq's (--bench --seq 2048: the short sequences only, N = 512..2048). */
static inline long bench_n_last(const Opts *o) { return (o->given & OPT_GIVEN_SEQ) ? o->N : BENCH_N1; }

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
/* New Q, K, V from seed (rounded to the problem's dtype) into the same host and device buffers: a graph's replays. */
void problem_new_inputs(Problem *p, uint64_t seed);
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

// --- the tables and the CSV -------------------------------------------------------------------------

/* The forward's and the backward's CSV (decode's and FP8's have their own columns, said in their drivers). */
#define CSV_HEADER "mode,dtype,kernel,name,B,H,N,D,causal,ms,tflops,peak_bytes,max_abs,rel_l2"
/* One CSV row of p's shape; err = {max abs, rel L2}, or NULL when not measured (written as 0). */
void csv_row(FILE *f, const char *mode, const Problem *p, int id, const char *name, double ms, double tflops,
             size_t peak, const double *err);
/* The same row for a shape that is no Problem (the GEMM ceiling: B = H = 1, N = D = the GEMM's size). */
void csv_row_shape(FILE *f, const char *mode, int dtype, long B, long H, long N, long D, int causal, int id,
                   const char *name, double ms, double tflops, size_t peak, const double *err);
/* "  kernel 3  mma   1.234 ms  123.45 TFLOP/s  peak  1.2 MB  2.00x naive", the times vs naive's when
 * t_naive > 0; then desc (the kernel's tiles and launch) on a line of its own when not NULL. */
void print_time_row(const char *label, const char *name, double ms, double tflops, size_t peak, double t_naive,
                    const char *desc);
/* "answer: the fastest fused <what> here (kernel K, name) takes ... vs naive's ...: Nx, and needs no
 * [B,H,N,N] buffer (naive's <buffers>: bytes)". */
void print_answer_fastest(const char *what, int id, const char *name, double ms, double t_naive, const char *buffers,
                          double bytes);
/* --bench's table at head dim D: a row per method (row 0 naive, row r > 0 the kernel ids[r] of the forward
 * or the backward) that has[r], TFLOP/s per N column (N = 512..n_last) from t[r][col] ms (< 0: OOM) and
 * flops_per_n * N FLOPs. */
void print_bench_table(Family f, long D, double flops_per_n, const int *ids, int rows, const double (*t)[BENCH_COLS],
                       const int *have, long n_last);

// --- compute-sanitizer's shapes ----------------------------------------------------------------------

/* The end of a --sanitize-shapes run: EXIT_OK when it ran something; else the line "step05: <fmt ...>" on
 * stderr and EXIT_USAGE (a --kernel that runs nothing is an error, not a pass). */
int sanitize_end(int ran, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
