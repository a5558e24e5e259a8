/*
 * gpu.h: the harness's GPU side, callable from C (steps' main.c) and CUDA.
 *
 * Built only when nvcc is found (HAVE_CUDA). Without it a step's GPU path
 * says "built without CUDA" and exits 77: see gpu_require().
 */
#ifndef GPU_H
#define GPU_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 if a CUDA device can be used. Never exits. */
int gpu_available(void);
/* For a GPU step: if no device, print "<prog>: SKIP: no CUDA device (...)"
 * (or "built without CUDA") and exit 77. */
void gpu_require(void);
/* "NVIDIA H100 80GB HBM3, sm_90, 132 SMs, 79.1 GB, 227 KB smem/block" */
const char *gpu_describe(void);
/* Name of the device only, for CSV and READMEs. */
const char *gpu_name(void);

/* What the kernels see of the GPU: the real device's figures, or under --gpu-as (common.h's g_gpu_as) the
 * emulated reader's GPU's (the smaller of the two). Every launcher sizes its tiles from these, never from
 * cudaDeviceGetAttribute directly, so that an emulated T4 refuses what a real T4 would. */
void gpu_cc(int *major, int *minor);     /* compute capability */
int gpu_smem_block(void);                /* bytes of shared memory per block, opt-in maximum */
int gpu_smem_sm(void);                   /* bytes of shared memory per SM */
/* The __CUDA_ARCH__ of the code this binary runs here (750 for a compute_75 PTX build JIT-compiled, 900 for
 * sm_90a): which of the kernels' code paths (Turing's, Ampere's, Hopper's) is running. */
int gpu_code_arch(void);
/* NULL if the GPU's tensor cores take dtype, else one line why not: bf16 needs compute capability 8.0
 * (Turing has fp16 tensor cores only). Asked before any kernel of that dtype runs. */
const char *gpu_dtype_unavailable(int dtype);

/* A launch this GPU cannot make (shared memory over its limit): the launcher calls gpu_refuse with one line
 * (printed on stderr unless quiet) and returns -1; the caller prints a SKIP line with gpu_last_refusal() and
 * never times it. Quiet while --check reports the refusals itself. */
void gpu_refuse(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
const char *gpu_last_refusal(void);
int gpu_refusals_quiet(int on); /* returns the setting it replaces */
/* Telling a refusal from a failure: gpu_refusal_clear() before a launch; after it returned an error, gpu_refused()
 * is the refusal's words if this GPU refused it, NULL if the launch failed otherwise. report_not_run(name, what):
 * the check's line for a launch that returned an error, a SKIP with the refusal's words (prefixed by what), or a
 * FAIL when nothing was refused: a launch that should have run and did not is never a SKIP. */
void gpu_refusal_clear(void);
const char *gpu_refused(void);
void report_not_run(const char *name, const char *what);

/* Tracked device memory, like the host's: current and peak bytes through
 * dmalloc_try/dfree only, so the peak of naive vs fused is exact.
 * dmalloc_try returns NULL when the limit (--mem-limit) would be passed or
 * cudaMalloc says out of memory (that error is not sticky: it is cleared);
 * any other CUDA error exits 1 with its name. */
void *dmalloc_try(size_t bytes);
void *dmalloc(size_t bytes, const char *what); /* exits 1 with the bytes asked for */
void dfree(void *p);
size_t dmem_current(void);
size_t dmem_peak(void);
void dmem_reset_peak(void);
void dmem_set_limit(size_t bytes); /* 0 = no limit beyond the device's own */
/* The limit as a device out-of-memory line names it: "device limit 85.0 GB (the device's memory, 12.3 GB
 * of it free)", or "device limit 8.0 GB (--mem-limit; the device has ... free of ...)". */
const char *dmem_limit_desc(char *buf, size_t n);
/* cudaMemGetInfo's view: used bytes on the whole device right now. */
size_t dmem_device_used(void);
size_t dmem_device_total(void);

/* Host float data to a new tracked device buffer stored as dtype (DT_FP32,
 * DT_FP16 or DT_BF16; rounded to nearest even on the host), and back into
 * floats. dpoison fills a device buffer of n elements with NaN (in its dtype)
 * so that an element a kernel forgets to write fails the check. */
void *dupload(const float *h, size_t n, int dtype, const char *what);
void dupload_into(void *d, const float *h, size_t n, int dtype); /* into an existing buffer */
void ddownload(float *h, const void *d, size_t n, int dtype);
int *dupload_int(const int *h, size_t n, const char *what); /* ints as they are (lengths, block tables) */
void *dupload_bytes(const void *h, size_t bytes, const char *what); /* bytes as they are (FP8 tensors) */
void ddownload_bytes(void *h, const void *d, size_t bytes);       /* and back */
void dzero(void *d, size_t bytes);                          /* bytes of zeros (a workspace's counters) */
void dpoison(void *d, size_t n, int dtype);

/* cudaDeviceSynchronize, checked: a fault inside a kernel shows here. */
void gpu_sync_check(void);

/* CUDA-event timing on the default stream: fn(ctx) warmup times, then each
 * of repeat calls between two events; returns the median in milliseconds.
 * fn only launches (asynchronous); the events bracket the GPU work. */
double gpu_time_median_ms(void (*fn)(void *), void *ctx, int warmup, int repeat);
/* n methods (fn[m] on ctx[m]) timed against each other: warmup calls each, then `repeat` rounds in which
 * each runs once, the median per method into ms[]. The GPU's clock moves with power and temperature;
 * timed one after the other the same code came out 10% apart on the H100, interleaved within 0.3%:
 * whatever drifts, drifts for every method alike. Step 05's bench, backward and ALiBi ratios and step 06's
 * causal speed-up are timed this way. */
void gpu_time_interleaved_ms(void (*const *fn)(void *), void *const *ctx, int n, int warmup, int repeat, double *ms);
/* fn(ctx, stream)'s launches captured once into a CUDA graph, on a stream of its own; gpu_graph_replay(g) launches
 * the graph on the default stream, where the timers' events are (its signature is a timer's fn). A replay leaves out
 * the host's work per launch and shortens the GPU's gap between one kernel and the next, as PyTorch's CUDA graphs
 * do: 1.6-3.1 us a decode step of two kernels on the H200, and plots/sdpa_decode.py times PyTorch from a graph. */
typedef struct GpuGraph GpuGraph;
/* A stream of its own (non-blocking: it does not wait for the default stream), for work that runs beside another
 * stream's; a launcher takes it as its void *stream. */
void *gpu_stream_create(void);
void gpu_stream_destroy(void *s);
GpuGraph *gpu_graph_capture(void (*fn)(void *ctx, void *stream), void *ctx);
void gpu_graph_replay(void *g);
void gpu_graph_free(GpuGraph *g);

#ifdef __cplusplus
}
#endif

#endif
