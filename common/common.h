/*
 * common.h: the small harness every step shares.
 *
 * Nothing of the attention algorithm lives here except the float64 reference
 * that every step is checked against. Each step's own algorithm lives in its
 * own folder, so a reader can find it there and only there.
 *
 * In order: options and their validation, sizes, RNG, fp16/bf16 conversion,
 * the float64 reference, error metrics and the NaN-proof comparison,
 * PASS/FAIL/SKIP reporting, timers, tracked host memory, .npy and CSV.
 */
#ifndef COMMON_H
#define COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exit codes (shared/DESIGN.md): 0 ok, 1 a check failed (or out of memory),
 * 2 usage error, 77 skipped (no CUDA device, or built without CUDA). */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_SKIP = 77 };

/* ------------------------------------------------------------------ options */

/* DT_FP8: e4m3 storage with scales (step 05's --dtype fp8 only: 05_cuda_fused/fp8/fp8.c); DT_COUNT: how many. */
enum { DT_FP32 = 0, DT_FP16 = 1, DT_BF16 = 2, DT_FP8 = 3, DT_COUNT = 4 };
enum { DEV_AUTO = 0, DEV_CPU = 1, DEV_GPU = 2 };

/* Which of the shared options a step accepts (an option a step does not
 * take is an unknown option there, with exit 2). */
enum {
    OPT_SHAPE = 1 << 0,  /* --batch --heads --seq --dim */
    OPT_BLOCK = 1 << 1,  /* --br --bc */
    OPT_DTYPE = 1 << 2,  /* --dtype */
    OPT_CAUSAL = 1 << 3, /* --causal */
    OPT_KERNEL = 1 << 4, /* --kernel */
    OPT_REPEAT = 1 << 5, /* --repeat */
    OPT_CSV = 1 << 6,    /* --csv FILE */
    OPT_CHECK = 1 << 7,  /* --check */
    OPT_NPY = 1 << 8,    /* --q --k --v --out FILE.npy */
    OPT_DEVICE = 1 << 9, /* --device cpu|gpu */
    OPT_SEED = 1 << 10,  /* --seed */
    OPT_GPU_AS = 1 << 11 /* --gpu-as NAME: a reader's GPU emulated on this one (the steps with a GPU half) */
};

/* The readers' GPUs that --gpu-as emulates: the limits a kernel meets there (compute capability, shared
 * memory per block and per SM). Emulated on a bigger GPU, they decide which kernels run and with which tiles,
 * and which code path runs is the build's (make CUDA_ARCH=compute_75 for Turing's, compute_80 for Ampere's,
 * JIT-compiled by the driver): correctness and kernel choice, never that GPU's speed. */
typedef struct {
    const char *name;        /* --gpu-as NAME */
    const char *label;       /* "Tesla T4 (Turing)" */
    int major, minor;        /* compute capability */
    int smem_block, smem_sm; /* bytes of shared memory: per block (opt-in), per SM */
} GpuProfile;
extern const GpuProfile gpu_profiles[];
extern const int n_gpu_profiles;
/* The --gpu-as profile in force (set by opts_parse_common), or NULL: the GPU as it is. */
extern const GpuProfile *g_gpu_as;

typedef struct {
    unsigned accept;             /* OPT_* mask of the step */
    unsigned dtype_mask;         /* 1 << DT_* the step can do */
    long B, H, N, D;             /* shape [B, H, N, D] */
    long BR, BC;                 /* row tile (Q), column tile (K/V) */
    int dtype;                   /* DT_* */
    int device;                  /* DEV_* */
    uint64_t seed;
    int causal, check, help;
    long kernel, kernel_last;    /* 0 = all; else kernels kernel..kernel_last (--kernel K or K-M) */
    long repeat;                 /* timed repeats after warm-up */
    const char *csv;
    const char *qfile, *kfile, *vfile, *outfile;
    unsigned given;              /* what the user set explicitly: 1 B, 2 H, 4 N, 8 D, OPT_GIVEN_DTYPE --dtype */
} Opts;

#define OPT_GIVEN_SEQ 4u
#define OPT_GIVEN_DIM 8u
#define OPT_GIVEN_DTYPE 16u
/* 1 if --kernel (none, K or K-M) asks for kernel id. */
static inline int opts_kernel(const Opts *o, long id) { return !o->kernel || (id >= o->kernel && id <= o->kernel_last); }

/* The program's name, used at the start of every error line. */
extern const char *g_prog;

/* Fill o with the defaults (B=2 H=8 N=1024 D=64, BR=BC=64, fp32, seed 0,
 * repeat 5) and set what the step accepts. */
void opts_init(Opts *o, const char *prog, unsigned accept, unsigned dtype_mask);

/* Try argv[*i] as a shared option. Returns 1 if consumed (and advances *i
 * past its value), 0 if the option is not a shared one this step accepts.
 * A bad value exits 2 with one line. */
int opts_parse_common(Opts *o, int argc, char **argv, int *i);

/* The shape the reader's files give ([B, H, N, D], from path(s) `files`) against --batch, --heads, --seq, --dim
 * where given: one line and exit 2 on the first that disagrees. */
void opts_given_agree(const Opts *o, const long shape[4], const char *files);

/* After the loop: range checks that involve several options (tiles vs. D,
 * size_t overflow of B*H*N*D*elem). Exits 2 on failure. */
void opts_validate(Opts *o, size_t elem_bytes);

/* --opt=value becomes --opt value (GNU style), before any option is parsed. Call first in main. */
void opts_expand(int *argc, char ***argv);

/* For a GPU run: refuse (exit 2) a shape whose grid, B*H*ceil(N / rows_per_block) blocks, passes CUDA's
 * 2^31 - 1 (--batch and --heads go up to 2^20 each; memory is checked when it is allocated). */
void opts_gpu_grid(const Opts *o, long rows_per_block);

/* For a step's own options. Each exits 2 with one line naming the option. */
const char *opt_value(int argc, char **argv, int *i); /* the value after argv[*i] */
long parse_long(const char *opt, const char *s, long lo, long hi);
double parse_double(const char *opt, const char *s, double lo, double hi);
size_t parse_size(const char *opt, const char *s); /* 8G, 512M, 64K, 1000 */
int parse_choice(const char *opt, const char *s, const char *const *choices, int n);
void usage_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;

/* The usage lines of the shared options this step accepts. */
void print_common_usage(const Opts *o);

const char *dtype_name(int dtype);
size_t dtype_size(int dtype);

/* -------------------------------------------------------------------- sizes */

/* a*b with overflow detection: returns 0 on overflow, 1 and *r on success. */
int size_mul(size_t a, size_t b, size_t *r);
/* a*b*c*d*e bytes or exit 2 naming what (B*H*N*D*sizeof and the like). */
size_t size_or_die(const char *what, size_t a, size_t b, size_t c, size_t d, size_t e);
/* "1.07 GB" style (powers of 1000, as the chapter writes GB). */
const char *fmt_bytes(double bytes, char *buf, size_t n);

/* ---------------------------------------------------------------------- RNG */

/* splitmix64 seeding xoshiro256**: the same seed gives the same numbers on
 * every machine (rand() does not). */
typedef struct { uint64_t s[4]; } Rng;
void rng_seed(Rng *r, uint64_t seed);
uint64_t rng_next(Rng *r);
double rng_uniform(Rng *r);  /* [0, 1) with 53 random bits */
double rng_normal(Rng *r);   /* N(0, 1), Box-Muller */
void fill_normal(float *x, size_t n, Rng *r);

/* Q, K, V of [B, H, N, D] from the seed: Q from seed, K from seed+1, V from seed+2,
 * so the three are independent and a step can regenerate any one of them. */
void make_qkv(float *q, float *k, float *v, size_t n, uint64_t seed);

/* ------------------------------------------------------- fp16 / bf16 storage */

/* IEEE binary16 and bfloat16 from/to float, round to nearest even, by bits so
 * that C11 without _Float16 still works. Rounding a float through these is
 * exactly what storing it as fp16 / bf16 does. */
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);
float bf16_to_f32(uint16_t h);
/* x[i] = float(dtype(x[i])): the value the GPU will see after storage in dtype. */
void round_to_dtype(float *x, size_t n, int dtype);

/* q . k over D in fp32 with 8 independent partial sums: the same products as
 * the plain loop, summed in another order, so the compiler keeps 8
 * multiply-adds in flight (and uses SIMD) instead of waiting on one running
 * sum; about 3x faster on the CPU steps. Steps 01 and 04 both use it, so that
 * step 02 compares two algorithms, not two dot products. */
float dot_f32(const float *a, const float *b, long D);

/* -------------------------------------------------------- float64 reference */

/* One output row of attention, all in double:
 * o[d] = sum_j softmax_j(q_i . k_j / sqrt(D)) v_j[d], causal: only j <= i.
 * q, k, v point at the head's [N, D] block. scratch holds N doubles; on return scratch[j] is
 * e^(s_j - max s) for the keys the row sees (j <= i when causal, else j < N): their sum is the row's l. */
void ref_attention_row(const float *q, const float *k, const float *v, long N, long D,
                       int causal, long i, double *scratch, double *o);
/* One query row q_row [D] against the first nkeys rows of k, v [*, D] (decode: the newest token's row
 * against its KV cache). scratch holds nkeys doubles. */
void ref_attention_keys(const float *q_row, const float *k, const float *v, long nkeys, long D, double *scratch,
                        double *o);
/* The whole [B, H, N, D] output (B*H = bh heads). */
void ref_attention(const float *q, const float *k, const float *v, long bh, long N, long D,
                   int causal, double *out);
/* The same with a score modifier, ALiBi: head x of the bh adds -slope[x] |i - j| to score (i, j)
 * (slope NULL: none). */
void ref_attention_bias(const float *q, const float *k, const float *v, long bh, long N, long D, int causal,
                        const float *slope, double *out);
/* One row of that (slope: this head's). */
void ref_attention_row_bias(const float *q, const float *k, const float *v, long N, long D, int causal, long i,
                            double slope, double *scratch, double *o);
/* ALiBi's slopes (Press, Smith, Lewis 2022): head h of H gets 2^(-8 (h+1) / H) when H is a power of 2;
 * otherwise those of the power of 2 P below H, then every other slope of 2P heads (the paper's code).
 * alibi_slopes fills [B*H], head b*H + h with slope h. */
double alibi_slope(long h, long H);
void alibi_slopes(float *slope, long B, long H);

/* ----------------------------------------------------- metrics and checking */

typedef struct {
    double max_abs, max_rel, rel_l2; /* against the reference */
    size_t n, n_nonfinite, n_bad;    /* elements, non-finite where ref finite, over tolerance */
    size_t bad_idx[3];               /* first few mismatches */
    float bad_got[3];
    double bad_ref[3];
} Err;

/* Compare out against ref. An element is bad when it is non-finite (tested on
 * its raw bits, so no compiler flag can fold the test away) where the
 * reference is finite, or when |out - ref| > atol + rtol*|ref|. NaN never
 * passes: a NaN fails every ordered comparison, and is counted as non-finite
 * before any arithmetic. max_rel uses |ref| + 1e-8 as in 001's max_rel_err. */
Err compare(const float *out, const double *ref, size_t n, double atol, double rtol);
/* The fp32 tolerance of a check, scaled with the problem as the 16-bit one is: at most 2x the error of
 * the naive (textbook) fp32 computation on the same inputs, never under 1e-5 (the chapter's 1e-6 is
 * what unit-scale inputs give; larger scores give larger errors to naive and tiled alike) and never over
 * 1e-4 (a broken naive must not open the door); NaN (naive failed or did not fit) gives 1e-5. */
double tol_fp32(double naive_err);
/* fp16/bf16: 2x naive's error in the same dtype, never above 2e-2 (NaN or a failed naive: 2e-2). */
double tol_16bit(double naive_err);
/* Same, rows given by index (sampled checks): out and ref are [nrows, D]. */
int f32_is_finite(float x);
/* Print a one-line summary "max abs 1.2e-06, max rel ..., rel L2 ..." into buf. */
const char *fmt_err(const Err *e, char *buf, size_t n);

/* ----------------------------------------------------------------- reporting */

/* check(ok, name, fmt...): prints "PASS name: detail" or "FAIL name: detail"
 * and counts it; returns ok. On FAIL with e != NULL, the first mismatches
 * (index, expected, got) follow on the same line. */
int report(int ok, const Err *e, const char *name, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
void report_skip(const char *name, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Prints "stepNN: X passed, Y failed, Z skipped" and returns the exit code:
 * 1 if anything failed, 0 otherwise. */
int report_finish(void);
int report_failed(void);

/* The checker's own test: a planted NaN, a planted inf and one element off
 * by more than the tolerance must each be caught; clean data must pass. */
void checker_selftest(void);

/* ---------------------------------------------------------------- diagnosis */

/* What a failing tiled forward's output looks like, for diagnose(). Fill what
 * is known; leave the rest zero/NULL. */
typedef struct {
    const Err *multi;          /* the failing run, 2+ K/V tiles per row (required) */
    const Err *single;         /* the same inputs with one K/V tile covering N, if run */
    int causal_split;          /* 1 if first_tile_err / later_tiles_err are set (causal runs) */
    double first_tile_err;     /* max abs error of the first row tile */
    double later_tiles_err;    /* max abs error of the row tiles after it */
    int neg_rows_known;        /* 1 if the inputs have rows whose every score is very negative */
    int neg_rows_broken;       /* ... and those rows came out all zero or NaN */
    int other_rows_ok;         /* ... while the other rows are right */
} Signature;

/* The most likely cause of a failure, from its signature (BREAK IT):
 * "running-max subtraction missing (exp overflow)", "running statistics not
 * rescaled (alpha/beta)", "mask built from tile-relative indices", "running
 * max initialised to 0 instead of -inf", or NULL when the signature is none
 * of these. */
const char *diagnose(const Signature *sig);

/* -------------------------------------------------------------------- timers */

double now_sec(void); /* CLOCK_MONOTONIC */
double median(double *x, int n); /* sorts x */
/* Call fn(ctx) warmup times, then time repeat calls; returns the median in seconds. */
double time_median(void (*fn)(void *), void *ctx, int warmup, int repeat);

/* --------------------------------------------------------- tracked host memory */

/* Every buffer a step allocates goes through these, so "peak bytes" is exact
 * and comparable between naive and tiled. tmalloc returns NULL (and prints
 * nothing) when the allocation would pass the limit or malloc fails; xmalloc
 * prints mem_oom_line's line and exits 1. */
void *tmalloc(size_t bytes);
void *xmalloc(size_t bytes, const char *what);
/* The out-of-memory line of the host, on stderr: "<prog>: out of host memory: asked for N bytes (1.07 GB)
 * for WHAT, X in use, host limit L (its origin)". A caller that learns of a refusal from a NULL deep in
 * a step's code passes mem_refused(): the bytes of the last request tmalloc refused on this thread. */
void mem_oom_line(size_t bytes, const char *what);
size_t mem_refused(void);
/* "host limit 108.12 GB (80% of this machine's 135.15 GB of RAM)", or "(--mem-limit)" when set. */
const char *mem_limit_desc(char *buf, size_t n);
void tfree(void *p);
size_t mem_current(void);
size_t mem_peak(void);
void mem_reset_peak(void);        /* peak := current */
void mem_set_limit(size_t bytes); /* 0 = physical memory */
size_t mem_limit(void);
size_t phys_mem_bytes(void);
/* The process's peak resident set (VmHWM), and a reset of it where Linux
 * allows (writing 5 to /proc/self/clear_refs); returns 0 if it could not. */
size_t rss_peak_bytes(void);
int rss_reset_peak(void);

/* --------------------------------------------------------------- .npy, CSV */

/* Read a C-order float32 or float16 .npy into a new tracked float buffer.
 * The shape must equal shape[0..ndim-1]; otherwise, or on a missing or
 * malformed file, one line naming opt and exit 2. */
float *npy_load(const char *opt, const char *path, const long *shape, int ndim);
/* The same, and float64 ('<f8') data too, each value rounded to the nearest float; *was_f64 (may be NULL)
 * says whether the file was float64 (a grader takes what NumPy's float64 promotion saves). */
float *npy_load_f64ok(const char *opt, const char *path, const long *shape, int ndim, int *was_f64);
/* Exit 2 with one line (how many NaN and inf, where the first is) if the 4-D array x of that shape, read from
 * path for option opt, holds a non-finite value. */
void finite_or_die(const char *opt, const char *path, const float *x, const long *shape);
/* Read just the shape of a .npy (ndim <= 4); exits 2 like npy_load. */
int npy_shape(const char *opt, const char *path, long *shape);
/* Write float32 (dtype DT_FP32) or float16 (DT_FP16) .npy. Returns 0 on success. */
int npy_save(const char *path, const float *x, const long *shape, int ndim, int dtype);
/* Write a float64 .npy, as NumPy saves a float64 array. Returns 0 on success. */
int npy_save_f64(const char *path, const double *x, const long *shape, int ndim);

/* Load --q/--k/--v (shape from --q, the others must match) or make random ones
 * from the seed. Sets o->B..D from the file. Buffers are tracked. */
void inputs_load_or_make(Opts *o, float **q, float **k, float **v);

/* fopen for --csv with a header line; exits 2 if the file can't be opened. */
FILE *csv_open(const char *path, const char *header);

#ifdef __cplusplus
}
#endif

#endif
