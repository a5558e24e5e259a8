/* memprobe.h: step 02's table, shared by its CPU mode (main.c) and its GPU
 * mode (memprobe_gpu.cu), so both print the same columns and answer lines. */
#ifndef MEMPROBE_H
#define MEMPROBE_H

#include <stdio.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    long N;
    const char *method;   /* "naive", "tiled", "fused" */
    int oom;              /* refused: the allocation would pass the limit, or malloc/cudaMalloc failed */
    size_t peak_bytes;    /* tracked allocator's peak during the run */
    size_t need_bytes;    /* what the run asks for: Q, K, V, O + S, P (naive) or + tiles/statistics */
    size_t rss_bytes;     /* the other view: peak RSS (CPU) or cudaMemGetInfo's used bytes (GPU) */
    double ms;
    double max_diff;      /* against the other method's output (CPU), or the float64 reference on a few rows (GPU) */
} ProbeRow;

void probe_print_header(const char *unit_note);
void probe_print_row(const ProbeRow *r, FILE *csv, const char *device, const char *dtype, const Opts *o, size_t limit);
/* The chapter's two answers, each on a line of its own. */
void probe_answers(const ProbeRow *naive, const ProbeRow *tiled, int n, size_t limit, const char *tiled_name);

/* GPU mode (memprobe_gpu.cu): the same sweep on the device, naive cuBLAS
 * attention vs step 05's fused kernel, in o->dtype; mem_limit 0 = the
 * device's own memory. Returns an exit code. */
int memprobe_gpu(const Opts *o, const long *Ns, int nN, size_t mem_limit, FILE *csv);
/* GPU part of --check: PASS/FAIL lines (no report_finish). */
void memprobe_gpu_checks(void);

#ifdef __cplusplus
}
#endif

#endif
