/*
 * nogpu.c: the GPU harness when the build has no nvcc. Every GPU step then
 * says so in one line and exits 77 (skipped), and the CPU paths still work.
 */
#include "common.h"
#include "gpu.h"

#include <stdlib.h>

int gpu_available(void) { return 0; }
void gpu_require(void)
{
    printf("%s: SKIP: built without CUDA (no nvcc found at build time)\n", g_prog);
    exit(EXIT_SKIP);
}
const char *gpu_describe(void) { return "none (built without CUDA)"; }
const char *gpu_name(void) { return "none"; }
void *dmalloc_try(size_t bytes) { (void)bytes; return NULL; }
void *dmalloc(size_t bytes, const char *what) { (void)bytes; (void)what; gpu_require(); return NULL; }
void dfree(void *p) { (void)p; }
size_t dmem_current(void) { return 0; }
size_t dmem_peak(void) { return 0; }
void dmem_reset_peak(void) {}
void dmem_set_limit(size_t bytes) { (void)bytes; }
const char *dmem_limit_desc(char *buf, size_t n) { snprintf(buf, n, "no device (built without CUDA)"); return buf; }
size_t dmem_device_used(void) { return 0; }
size_t dmem_device_total(void) { return 0; }
void *dupload(const float *h, size_t n, int dtype, const char *what) { (void)h; (void)n; (void)dtype; (void)what; gpu_require(); return NULL; }
void dzero(void *d, size_t bytes) { (void)d; (void)bytes; gpu_require(); }
int *dupload_int(const int *h, size_t n, const char *what) { (void)h; (void)n; (void)what; gpu_require(); return NULL; }
void *dupload_bytes(const void *h, size_t bytes, const char *what) { (void)h; (void)bytes; (void)what; gpu_require(); return NULL; }
void ddownload_bytes(void *h, const void *d, size_t bytes) { (void)h; (void)d; (void)bytes; gpu_require(); }
void ddownload(float *h, const void *d, size_t n, int dtype) { (void)h; (void)d; (void)n; (void)dtype; gpu_require(); }
void dpoison(void *d, size_t n, int dtype) { (void)d; (void)n; (void)dtype; gpu_require(); }
double gpu_time_median_ms(void (*fn)(void *), void *ctx, int warmup, int repeat) { (void)fn; (void)ctx; (void)warmup; (void)repeat; gpu_require(); return 0; }
void gpu_time_interleaved_ms(void (*const *fn)(void *), void *const *ctx, int n, int warmup, int repeat, double *ms)
{ (void)fn; (void)ctx; (void)n; (void)warmup; (void)repeat; (void)ms; gpu_require(); }
void gpu_sync_check(void) { gpu_require(); }
void dupload_into(void *d, const float *h, size_t n, int dtype) { (void)d; (void)h; (void)n; (void)dtype; gpu_require(); }
