/* breaks.h: step 07's forward with its breaks, on the CPU (breaks.c) and the GPU (break_gpu.cu). */
#ifndef BREAKS_H
#define BREAKS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* BREAK_NONE: the intact forward of step 04.
 * BREAK_NO_MAX (Break 1, BREAK-1 lines): p = e^s with no max subtracted, l and o summed raw.
 * BREAK_NO_RESCALE (Break 2, BREAK-2 lines): the tile max kept, alpha and beta dropped, m = m_tile.
 * BREAK_MAX_ZERO (BREAK-3 line): the running max starts at 0 instead of -inf.
 * BREAK_ALIBI_RELATIVE (BREAK-ALIBI-REL): ALiBi's bias from tile-relative indices.
 * BREAK_ALIBI_AFTER_MAX (BREAK-ALIBI-MAX): ALiBi's bias added after m_tile is taken. */
enum { BREAK_NONE = 0, BREAK_NO_MAX = 1, BREAK_NO_RESCALE = 2, BREAK_MAX_ZERO = 3, BREAK_ALIBI_RELATIVE = 4,
       BREAK_ALIBI_AFTER_MAX = 5 };

/* Per K/V tile of one traced query row: what the chapter asks to print. */
typedef struct {
    float max_s, max_p, l;
    float max_o;    /* max |o| of the row's running output after this tile */
    int nonfinite;  /* anything inf or NaN in p, l or o of this row so far */
} TraceTile;

/* Where the first inf appeared (over all rows): -1 if never. */
typedef struct {
    long tile, col, row;  /* K/V tile index, absolute key column, query row */
    long head;            /* which of the bh heads */
    float s;              /* the score that overflowed e^s (or the largest score of that tile) */
    const char *what;     /* "p", "l" or "o" */
} FirstInf;

/* The tiled forward with the break brk. fp16 = 1 stores s, p, l and o in
 * fp16 after every operation (rounded through fp16, the CPU's stand-in for
 * a port that keeps its tile arithmetic in __half), so that fp16 overflows
 * where an fp16 kernel would: e^s > 65504 from s > 11.09. causal = 1 masks
 * with step 06's absolute indices and skips the tiles above the diagonal (the
 * Break 1 and Break 2 that ./step06 --train trains with are checked against
 * this). trace (may be NULL) gets one entry per K/V tile for query row
 * trace_row of head 0.
 * slope (may be NULL): ALiBi, -slope[x] |i - j| on head x's scores, placed as brk says.
 * Returns 0, or -1 on out of memory. */
int break_forward_cpu(const float *q, const float *k, const float *v, float *o,  // [bh, N, D]
                      long bh, long N, long D, long BR, long BC, int brk, int causal, int fp16,
                      long trace_row, TraceTile *trace, FirstInf *first, const float *slope);

/* The inputs of step 07 (and of its grader's sets): Q, K, V of [bh, N, D] from the seed, Q multiplied by
 * scale (the scores scale with it). kind INPUTS_NEG_ROWS: the first N/2 rows of each head score below
 * about -100 against every key (Break 3's case); INPUTS_FAR_KEY: rows N/2.. of each head point at key 0
 * alone, score 300 there and about an eighth of that at the others (ALiBi's bias after the max: the key
 * with the largest score is the one with the largest bias). Rounded to fp16, so that fp16 and fp32 runs
 * see the same numbers. */
enum { INPUTS_RANDOM = 0, INPUTS_NEG_ROWS = 1, INPUTS_FAR_KEY = 2 };
void break_inputs(float *q, float *k, float *v, long bh, long N, long D, double scale, int kind, uint64_t seed);

/* The same breaks in a CUDA kernel (one thread per query row, step 05's
 * kernel 1 shape). Host pointers [bh, N, D]: it uploads, runs, downloads
 * (O poisoned with NaN before the run). fp16 = 1 keeps s, p, l, o in __half.
 * Returns 0, or -1 if D is not 32, 64 or 128. */
int break_forward_gpu(const float *q, const float *k, const float *v, float *o, long bh, long N, long D, long BC,
                      int brk, int fp16);

#ifdef __cplusplus
}
#endif

#endif
