/*
 * kernels.h: the registry of step 05's kernels, four families of them.
 *
 *   forward/kernelNN_*.cu   the forward, fp32 and fp16/bf16 (FusedKernel, FUSED_REGISTER)
 *   fp8/kernelNN_*.cu       the forward in FP8 (Fp8Kernel, FP8_REGISTER); numbered with the forward's ladder
 *   backward/bwdNN_*.cu     the backward (BackwardKernel, BWD_REGISTER)
 *   decode/decodeNN_*.cu    decode against a KV cache (DecodeKernel, DECODE_REGISTER)
 *
 * Each kernel file defines one entry and registers it at file scope, so adding a kernel is adding a file: no
 * list to edit. Every entry names the kernel it extends (.extends: the rung below it on the ladder, whose code
 * it changes by one idea; `make idea K=N` shows that change, and `make check` checks the rung exists), its
 * name and its idea in one line. Step 05 (and step 06, which runs the same kernels causally) walks a family's
 * registry in id order.
 */
#ifndef KERNELS_H
#define KERNELS_H

#include <math.h>
#include <stddef.h>

#include "common.h"

/* The most kernels one family holds (the registry's capacity; the tables and lists that hold a family are this long). */
enum { MAX_KERNELS = 32 };
/* The pickers' memory (fused_fits, bwd_fits): an answer is kept per kernel id up to MAX_FIT_ID and per head dim
 * D = 16, 32, .. MAX_FIT_D (the largest any kernel takes); a kernel or D beyond is asked every time. */
enum { MAX_FIT_ID = 99, MAX_FIT_D = 128 };

/* log2(e). Every kernel computes e^x as 2^(x log2 e), the exponential unit's instruction (ex2), so it keeps scores in
 * log2 units: s_ij log2(e) / sqrt(D), one multiply folded into the score's scale. */
#define LOG2E 1.4426950408889634f
static inline float softmax_scale_log2(long D) { return LOG2E / sqrtf((float)D); } /* log2(e) / sqrt(D) */

typedef struct FusedKernel {
    int id;                 /* the N of --kernel N and of kernelNN_*.cu */
    int extends;            /* the kernel one idea below this one (forward or FP8 ladder), 0 for kernel 1 */
    const char *name;       /* "transcription", "smem tiles", ... */
    const char *idea;       /* one line: the one idea this kernel adds */
    unsigned dtypes;        /* 1u << DT_FP32 | 1u << DT_FP16 | 1u << DT_BF16 it accepts */
    /* 1 if this kernel is built for head dim D (others: a usage error upstream). */
    int (*supports_dim)(long D);
    /* O = softmax(Q K^T / sqrt(D)) V on device pointers, all [B, H, N, D]
     * contiguous in the kernel's dtype (float, __half or __nv_bfloat16; O in
     * the same dtype). causal != 0: key index <= query index, with absolute
     * indices and K/V tiles wholly above the diagonal skipped. Launches on
     * stream s (a cudaStream_t, void * so that C can include this header),
     * checks the launch (CUDA_CHECK_LAST), does not synchronise.
     * Returns 0, or -1 after printing one line if it cannot run this case
     * (shared memory over the device limit, say). */
    int (*launch)(const void *q, const void *k, const void *v, void *o, long B, long H, long N, long D,
                  int dtype, int causal, void *s);
    /* Tile sizes and launch shape for this D, for the output ("BR=64 BC=64, 128 threads"). */
    void (*describe)(long D, int dtype, char *buf, size_t n);
    /* NULL for a kernel that runs on any CUDA GPU; else returns NULL when it
     * runs on this one, or one line saying why not (kernels 10, 11: Hopper only).
     * Callers skip an unavailable kernel and print the line once. */
    const char *(*unavailable)(void);
    /* NULL for a kernel that does not write L; else launch's work plus
     * L = m + log l per row, the natural log of the row's softmax
     * denominator ([B, H, N] fp32, the one number per row the backward
     * rebuilds P from: p_ij = e^(s_ij - L_i)). L may be NULL: then it is
     * launch exactly, and the store is skipped by one uniform branch at the
     * end of the kernel (measured: ./step05 --backward prints both times). */
    int (*launch_l)(const void *q, const void *k, const void *v, void *o, float *L, long B, long H, long N, long D,
                    int dtype, int causal, void *s);
    /* NULL for a kernel without a score modifier; else launch's work with ALiBi: -slope[x] |i - j| added to
     * head x's score (i, j), absolute indices, before the row max (slope: device [B*H] floats; question 5). */
    int (*launch_alibi)(const void *q, const void *k, const void *v, void *o, const float *slope, long B, long H,
                        long N, long D, int dtype, int causal, void *s);
    /* 1: one block per SM taking row tiles from a counter in device memory (kernels 18 on): --check runs it
     * captured in a CUDA graph and on two streams too. */
    int persistent;
} FusedKernel;

/* The line why kernel k cannot run on this device, or NULL if it can. */
#define FUSED_UNAVAILABLE(k) ((k)->unavailable ? (k)->unavailable() : (const char *)0)

#ifdef __cplusplus
extern "C" {
#endif

/* Registration (C++ static initialisation; the .cu files are C++). */
int fused_register(const FusedKernel *k);
#define FUSED_REGISTER(k) [[maybe_unused]] static const int fused_registered_##k = fused_register(&(k))

/* The registered kernels in id order; n_out gets the count. */
const FusedKernel *const *fused_kernels(int *n_out);
const FusedKernel *fused_kernel(int id); /* NULL if no such id */
/* 1 if this GPU (or the --gpu-as GPU) takes kernel k's launch for dtype at D: one launch on a small problem,
 * asked once and remembered (shared memory depends on D and the dtype, not N). For the pickers: a refused
 * launch elsewhere is a SKIP line where it happens. */
int fused_fits(const FusedKernel *k, int dtype, long D);

#ifdef __cplusplus
}
#endif

/* --- the backward kernels (bwdN_*.cu), registered the same way ---------------------
 *
 * Given Q, K, V, the forward's O and L, and dO = dLoss/dO, each computes
 * dQ, dK, dV of O = softmax(Q K^T / sqrt(D)) V (causal: the same mask as the
 * forward), recomputing each tile of P from L instead of reading it. */
typedef struct BackwardKernel {
    int id;                 /* the N of --backward --kernel N and of bwdNN_*.cu */
    int extends;            /* the backward kernel one idea below this one, 0 for backward kernel 1 */
    const char *name, *idea;
    unsigned dtypes;        /* 1u << DT_* it accepts */
    int (*supports_dim)(long D);
    /* Device bytes of scratch the launch needs (Delta, and for the 16-bit
     * kernels L in log2 units and the fp32 dQ accumulator): the caller
     * allocates it once, so that no timed run allocates. */
    size_t (*workspace)(long B, long H, long N, long D, int dtype);
    /* q, k, v, o, dout, dq, dk, dv: [B, H, N, D] in the kernel's dtype; L:
     * [B, H, N] fp32 from the forward's launch_l; ws: workspace() bytes.
     * Launches on stream s, checks each launch, does not synchronise.
     * Returns 0, or -1 after one line if it cannot run this case. */
    int (*launch)(const void *q, const void *k, const void *v, const void *o, const void *dout, const float *L,
                  void *dq, void *dk, void *dv, void *ws, long B, long H, long N, long D, int dtype, int causal,
                  void *s);
    void (*describe)(long D, int dtype, char *buf, size_t n);
    const char *(*unavailable)(void); /* as FusedKernel's */
    /* 1 if dQ is the same bit for bit run to run (0: fp32 atomics add the
     * K/V tiles' parts in the order they arrive). */
    int dq_deterministic;
    /* The id of a kernel whose dK and dV this one's must equal bit for bit
     * (the same arithmetic, in another order of issue or another way of
     * adding dQ: --check compares them), or 0: none. */
    int dkdv_as;
    /* NULL, or a function returning 1 for the cases (D, causal) where this
     * kernel adds dK's and dV's row tiles in an order of its own (backward
     * kernel 19: D = 128, not causal): there dkdv_as's comparison does not
     * apply, and the graph and streams check holds its dK and dV to 1e-3 of
     * their largest, as dQ. */
    int (*own_order)(long D, int causal);
    int persistent;         /* as FusedKernel's */
    /* NULL, or for a kernel that splits its last round's walks (backward kernel 20) how it splits this shape on this
     * GPU, written into buf as the end of a --check line: whether a case is split depends on the SM count. */
    void (*split_note)(long B, long H, long N, long D, int causal, char *buf, size_t n);
} BackwardKernel;

#define BWD_UNAVAILABLE(k) ((k)->unavailable ? (k)->unavailable() : (const char *)0)

#ifdef __cplusplus
extern "C" {
#endif
/* Registration and the registered backward kernels in id order, as above. */
int bwd_register(const BackwardKernel *k);
#define BWD_REGISTER(k) [[maybe_unused]] static const int bwd_registered_##k = bwd_register(&(k))
const BackwardKernel *const *bwd_kernels(int *n_out);
const BackwardKernel *bwd_kernel(int id); /* NULL if no such id */
int bwd_fits(const BackwardKernel *k, int dtype, long D); /* as fused_fits */
#ifdef __cplusplus
}
#endif

/* --- the decode kernels (decodeN_*.cu), registered the same way ---------------------
 *
 * Generation's attention: each of B sequences has n new query rows (1 for the next token, up to 16 for
 * speculative decoding's verify step) at its newest positions, against a cache of its len_b keys and
 * values, the new rows' own included; causal among the new rows (row i sits at position len_b - n + i
 * and sees keys 0 .. len_b - n + i). Hq query heads share Hkv key/value heads (Hq a multiple of Hkv:
 * multi-head Hkv = Hq, grouped-query, multi-query Hkv = 1): query head hq reads KV head hq / (Hq / Hkv). */
typedef struct {
    long B, Hq, Hkv, D;
    long n;              /* new query rows per sequence, 1 .. 16 */
    long max_len;        /* the longest len_b; the contiguous cache holds max_len rows per (sequence, KV head) */
    const int *len;      /* device [B]: len_b, n <= len_b <= max_len */
    int dtype;
    const void *q;       /* [B, Hq, n, D] */
    void *o;             /* [B, Hq, n, D] */
    const void *k, *v;   /* the contiguous cache: [B, Hkv, max_len, D] each */
    /* the paged cache (vLLM's): pools of pages of `page` keys, a block table naming sequence b's i-th page;
     * pages in any order, and shared between sequences (a common prefix is stored once) */
    const void *k_pool, *v_pool; /* [pages, Hkv, page, D] each */
    const int *table;    /* device [B, max_pages] */
    long page, max_pages; /* max_pages >= ceil(max_len / page): decode kernel 13 reads a tile's entries before len */
    long splits;         /* 0: a split kernel chooses S to fill the GPU; else exactly this many (capped at the tiles):
                          * --check compares two kernels on the same splits, bit for bit */
    long pool_pages;     /* the pages k_pool and v_pool hold (decode kernel 8 reads the pool as a tensor of that extent) */
} DecodeArgs;

typedef struct DecodeKernel {
    int id;                 /* the N of --decode --kernel N and of decodeNN_*.cu */
    int extends;            /* the decode kernel one idea below this one, 0 for decode kernel 1 */
    const char *name, *idea;
    unsigned dtypes;        /* 1u << DT_* it accepts */
    int (*supports_dim)(long D);
    int paged;              /* 1: reads k_pool/v_pool through the table; 0: the contiguous k, v */
    /* Device bytes of scratch for a's shape (the split's partial states), allocated once by the caller;
     * NULL: none. */
    size_t (*workspace)(const DecodeArgs *a);
    /* Launches on stream s, checks each launch, does not synchronise; 0, or -1 after one line. */
    int (*launch)(const DecodeArgs *a, void *ws, void *s);
    /* One line: the grid and tiles it uses for a's shape ("S = 8 splits of 512 keys, 256 blocks"). */
    void (*describe)(const DecodeArgs *a, char *buf, size_t n);
    const char *(*unavailable)(void);
    /* NULL, or what this kernel changes that is only when or how the work runs (a launch, a round of loads), not its
     * sums: then its O equals the kernel it extends bit for bit on the same splits, and --check compares the two. */
    const char *same_sums;
} DecodeKernel;

#define DECODE_UNAVAILABLE(k) ((k)->unavailable ? (k)->unavailable() : (const char *)0)

#ifdef __cplusplus
extern "C" {
#endif
int decode_register(const DecodeKernel *k);
#define DECODE_REGISTER(k) [[maybe_unused]] static const int decode_registered_##k = decode_register(&(k))
const DecodeKernel *const *decode_kernels(int *n_out);
const DecodeKernel *decode_kernel(int id); /* NULL if no such id */
#ifdef __cplusplus
}
#endif

/* --- the FP8 kernels (fp8/kernelNN_*.cu), registered the same way -------------------------------------------------
 *
 * Q, K, V stored in e4m3 with a scale per block (fp8/fp8.h: the layouts and the quantizers); O in fp16 or bf16. */
typedef struct {
    long B, H, N, D, Npad, nqb, nkb;
    int causal, out_dtype;      /* out_dtype: DT_FP16 or DT_BF16, O's storage */
    const unsigned char *q, *k, *vt; /* device, fp8_quantize's layouts (e4m3 codes) */
    const float *sq, *sk, *sv;  /* device */
    void *o;                    /* device [B, H, N, D] in out_dtype */
} Fp8Args;

typedef struct Fp8Kernel {
    int id;                 /* the N of --dtype fp8 --kernel N and of fp8/kernelNN_*.cu: the forward's numbering */
    int extends;            /* the kernel one idea below this one (kernel 15 extends the forward's kernel 12) */
    const char *name, *idea;
    /* Launches on stream s, 0 or -1 after one line (D not 64 or 128, say). */
    int (*launch)(const Fp8Args *a, void *s);
    void (*describe)(long D, char *buf, size_t n); /* its tiles and warpgroups at D */
    const char *(*unavailable)(void);
    int persistent;         /* 1: one block per SM walking the work items where it launches so; checked bit for bit against
                             * .persistent_of, or .extends when 0 */
    int persistent_of;      /* the kernel whose O it equals, launching a block per item (its tiles, not its schedule) */
    int long_rows_of;       /* persistent only where rows are short, and past that code of its own on another kernel's grid
                             * and tiles: that kernel, whose O it equals bit for bit there (0: none) */
} Fp8Kernel;

#define FP8_UNAVAILABLE(k) ((k)->unavailable ? (k)->unavailable() : (const char *)0)

#ifdef __cplusplus
extern "C" {
#endif
int fp8_register(const Fp8Kernel *k);
#define FP8_REGISTER(k) [[maybe_unused]] static const int fp8_registered_##k = fp8_register(&(k))
const Fp8Kernel *const *fp8_kernels(int *n_out);
const Fp8Kernel *fp8_kernel(int id); /* NULL if no such id */
#ifdef __cplusplus
}
#endif

#endif
