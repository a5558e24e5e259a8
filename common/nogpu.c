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
size_t dmem_device_used(void) { return 0; }
size_t dmem_device_total(void) { return 0; }
