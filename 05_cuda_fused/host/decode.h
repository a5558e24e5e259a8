/* decode.h: step 05's --decode, the decode family's driver (decode.c): the decode kernels (decode/decodeNN_*.cu)
 * checked against float64 and timed in GB/s of cache read against the device's measured read bandwidth; and the
 * device helpers of decode_util.cu that it needs (a read-bandwidth probe, a random fill for the benchmark's large
 * caches). */
#ifndef DECODE_H
#define DECODE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int on;             /* --decode */
    long Hkv;           /* --kv-heads (default: --heads, multi-head) */
    long n;             /* --new: new query rows per sequence, 1 .. 16 (default 1) */
    long page;          /* --page: the paged cache's page, a power of two in 16 .. 256 (default 64) */
    const char *lens;   /* --lens a,b,c: each sequence's cache length (its new rows included) */
    int spread;         /* --spread: lengths drawn uniformly from n .. --seq */
    int given_hkv, given_n;
    const char *qf, *kf, *vf; /* --q, --k, --v: the reader's new rows [B, Hq, n, D] and cache [B, Hkv, L, D] */
    float *qx, *kx, *vx;      /* their values, read (and found finite) by decode_files_validate */
} DecodeOpts;

void decode_opts_init(DecodeOpts *d);
/* Try argv[*i] as a decode option; 1 if consumed (exits 2 on a bad value). */
int decode_parse(DecodeOpts *d, int argc, char **argv, int *i);
void decode_usage(void);
/* --decode with --q, --k, --v: the three files' shapes checked against each other and taken as the problem's
 * (B, Hq, L, D into o; n, Hkv into d), the files moved from o to d (the forward's [B, H, N, D] check does not
 * apply) and read (the decode run takes their buffers). Exits 2 with one line on files that disagree or hold a
 * value that is not finite: on any machine, before a GPU is looked for. */
void decode_files_validate(Opts *o, DecodeOpts *d);
/* The checks that need no GPU: the option combinations (exits 2). */
void decode_validate(const Opts *o, const DecodeOpts *d);
/* The decode kernels' check grid (PASS/FAIL lines; the caller calls report_finish); only: a kernel id or 0. */
void decode_run_checks(long only);
/* ./step05 --decode [--check | --bench | --sanitize-shapes]: exit code. */
int decode_main(const Opts *o, const DecodeOpts *d, int bench, int sanitize);

/* decode_util.cu */
/* Median GB/s of a kernel that reads `bytes` of device memory once (16-byte loads, summed so that nothing
 * is skipped), over `repeat` runs after a warm-up: the ceiling of a memory-bound decode. -1 if the buffer
 * does not fit. */
double dec_read_bandwidth_gbs(size_t bytes, int repeat);
/* n elements of dtype at d, normal-like (the sum of four uniforms, centred, variance 1) from seed: the
 * benchmark's caches, made on the device (the host would take minutes for gigabytes). */
void dec_fill_random(void *d, size_t n, int dtype, uint64_t seed);

#ifdef __cplusplus
}
#endif

#endif
