/*
 * gpu.cu: device detection, device info and the tracked device allocator.
 */
#include "gpu.cuh"

#include <cerrno>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <pthread.h>
#include <unistd.h>

#include "common.h"

static int g_avail = -1;

/* --- the watchdog ---------------------------------------------------------------------------------------------
 *
 * A kernel that never ends (a persistent kernel whose producer and consumers disagree on the schedule: the consumers
 * wait for a tile nobody loads) leaves the host waiting forever at its next sync: a check would print nothing and
 * never end. So every wait of this file (a sync, a copy back, the timer's events), and those the steps' own .cu
 * files make, runs under a deadline kept by a thread of its own (gpu.cuh's CUDA_WAITED): past it the program prints
 * one FAIL line naming the wait and exits with 1, as a failed check does. The kernel cannot be stopped from the
 * host; ending the process is what frees the GPU.
 *   FA_WATCHDOG_S=S   the deadline in seconds (default 120; 0: no watchdog). make sanitize sets a longer one:
 *                     compute-sanitizer's racecheck runs a kernel hundreds of times slower.
 *   FA_PLANT_HANG=1   the planted error of the watchdog's own check (common/check.sh): the first sync waits behind a
 *                     kernel that spins for ten deadlines, so the watchdog must fire first. */
enum { WATCHDOG_DEFAULT_S = 120 };
static pthread_mutex_t g_wd_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_wd_cv;
static int g_wd_state = -1;        /* -1 not set up, 0 off (FA_WATCHDOG_S=0), 1 idle, 2 armed */
static double g_wd_s;
static const char *g_wd_what;
static struct timespec g_wd_at;    /* the deadline, on CLOCK_MONOTONIC */

static int wd_passed(const struct timespec *t)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

static void *wd_main(void *)
{
    pthread_mutex_lock(&g_wd_mu);
    for (;;) {
        if (g_wd_state != 2) {
            pthread_cond_wait(&g_wd_cv, &g_wd_mu);
        } else if (pthread_cond_timedwait(&g_wd_cv, &g_wd_mu, &g_wd_at) == ETIMEDOUT && g_wd_state == 2 &&
                   wd_passed(&g_wd_at)) {
            /* the main thread is inside the CUDA runtime, not stdio: its lines so far go out first */
            fflush(stdout);
            printf("FAIL watchdog: %s waited %g s for the GPU: a kernel that never ends (a hang); the check after the "
                   "last line above launched it (FA_WATCHDOG_S sets the deadline)\n", g_wd_what, g_wd_s);
            fflush(stdout);
            _exit(1);
        }
    }
    return NULL;
}

__global__ void timer_spin(unsigned long long ns);

static void wd_setup(void)
{
    const char *s = getenv("FA_WATCHDOG_S");
    char *end = NULL;
    g_wd_s = WATCHDOG_DEFAULT_S;
    if (s) {
        errno = 0;
        g_wd_s = strtod(s, &end);
        if (errno || end == s || *end || !(g_wd_s >= 0 && g_wd_s <= 86400))
            usage_error("FA_WATCHDOG_S=%s: expected seconds in [0, 86400] (0: no watchdog)", s);
    }
    g_wd_state = 0;
    if (g_wd_s == 0) return;
    pthread_condattr_t a;
    pthread_t t;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&g_wd_cv, &a);
    pthread_condattr_destroy(&a);
    if (pthread_create(&t, NULL, wd_main, NULL) != 0) {
        fprintf(stderr, "%s: no thread for the watchdog: waits on the GPU have no deadline\n", g_prog);
        return;
    }
    pthread_detach(t);
    g_wd_state = 1;
    const char *h = getenv("FA_PLANT_HANG");
    if (h && strcmp(h, "1") == 0) {
        timer_spin<<<1, 1>>>((unsigned long long)(10 * g_wd_s * 1e9));
        CUDA_CHECK_LAST();
    }
}

/* The deadline for one wait on the GPU (what names it in the FAIL line), and its end: gpu.cuh's CUDA_WAITED, this
 * file's waits and the steps' .cu files' alike. */
extern "C" void gpu_wait_begin(const char *what)
{
    if (g_wd_state < 0) wd_setup();
    if (g_wd_state == 0) return;
    pthread_mutex_lock(&g_wd_mu);
    clock_gettime(CLOCK_MONOTONIC, &g_wd_at);
    const double at = g_wd_at.tv_nsec * 1e-9 + g_wd_s;
    g_wd_at.tv_sec += (time_t)at;
    g_wd_at.tv_nsec = (long)((at - (double)(time_t)at) * 1e9);
    g_wd_what = what;
    g_wd_state = 2;
    pthread_cond_signal(&g_wd_cv);
    pthread_mutex_unlock(&g_wd_mu);
}

extern "C" void gpu_wait_end(void)
{
    if (g_wd_state <= 0) return;
    pthread_mutex_lock(&g_wd_mu);
    g_wd_state = 1;
    pthread_mutex_unlock(&g_wd_mu);
}

/* The __CUDA_ARCH__ the driver picked for this binary on this device (the probe is built like every kernel), and
 * whether that code has Hopper's own instructions (sm_90a: __CUDA_ARCH_FEAT_SM90_ALL; a plain sm_90 build has not). */
__global__ void code_arch_probe(int *arch)
{
#ifdef __CUDA_ARCH__
    arch[0] = __CUDA_ARCH__;
#ifdef __CUDA_ARCH_FEAT_SM90_ALL
    arch[1] = 1;
#else
    arch[1] = 0;
#endif
#endif
}

static int g_code_arch[2] = {-1, 0};
extern "C" int gpu_code_arch(void)
{
    if (g_code_arch[0] < 0) {
        int *d = NULL;
        g_code_arch[0] = 0;
        CUDA_CHECK(cudaMalloc(&d, sizeof g_code_arch));
        CUDA_CHECK(cudaMemset(d, 0, sizeof g_code_arch));
        code_arch_probe<<<1, 1>>>(d);
        CUDA_CHECK_LAST();
        CUDA_CHECK(cudaMemcpy(g_code_arch, d, sizeof g_code_arch, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaFree(d));
    }
    return g_code_arch[0];
}

static void real_cc(int *major, int *minor)
{
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(major, cudaDevAttrComputeCapabilityMajor, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(minor, cudaDevAttrComputeCapabilityMinor, dev));
}

/* --gpu-as: the emulated GPU must be one this device can stand in for (not newer), and one that could run
 * this binary's code (a compute_80 build has no Turing path: a T4 could not run it). Bad input: exit 2. */
static void emulation_check(void)
{
    int major, minor;
    real_cc(&major, &minor);
    const int real = major * 10 + minor, want = g_gpu_as->major * 10 + g_gpu_as->minor, code = gpu_code_arch() / 10;
    if (want > real)
        usage_error("option --gpu-as %s: this GPU (compute capability %d.%d) cannot stand in for a newer one (%d.%d)",
                    g_gpu_as->name, major, minor, g_gpu_as->major, g_gpu_as->minor);
    if (code > want)
        usage_error("option --gpu-as %s: this build runs code for compute capability %d.%d here, which a %d.%d GPU "
                    "cannot run; build its path: make CUDA_ARCH=compute_%d%d", g_gpu_as->name, code / 10, code % 10,
                    g_gpu_as->major, g_gpu_as->minor, g_gpu_as->major, g_gpu_as->minor);
}

extern "C" int gpu_available(void)
{
    if (g_avail < 0) {
        int n = 0;
        cudaError_t e = cudaGetDeviceCount(&n);
        g_avail = (e == cudaSuccess && n > 0);
        if (e != cudaSuccess) (void)cudaGetLastError();
        if (g_avail && g_gpu_as) emulation_check();
    }
    return g_avail;
}

extern "C" void gpu_require(void)
{
    if (!gpu_available()) {
        int n = 0;
        cudaError_t e = cudaGetDeviceCount(&n);
        printf("%s: SKIP: no CUDA device (%s)\n", g_prog, e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
        exit(EXIT_SKIP);
    }
}

extern "C" const char *gpu_name(void)
{
    static char name[256];
    cudaDeviceProp p;
    if (!name[0]) {
        CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
        snprintf(name, sizeof name, "%s", p.name);
    }
    return name;
}

extern "C" void gpu_cc(int *major, int *minor)
{
    if (g_gpu_as) { *major = g_gpu_as->major, *minor = g_gpu_as->minor; return; }
    real_cc(major, minor);
}

static int attr_or_emulated(cudaDeviceAttr a, int emulated)
{
    int dev = 0, v = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&v, a, dev));
    return g_gpu_as && emulated < v ? emulated : v;
}
/* Read once: every launch asks (a launcher sizes its tiles from it), and a host call per launch is time the
 * GPU may wait through. */
extern "C" int gpu_smem_block(void)
{
    static int v = -1;
    if (v < 0) v = attr_or_emulated(cudaDevAttrMaxSharedMemoryPerBlockOptin, g_gpu_as ? g_gpu_as->smem_block : 0);
    return v;
}
extern "C" int gpu_smem_sm(void)
{
    static int v = -1;
    if (v < 0) v = attr_or_emulated(cudaDevAttrMaxSharedMemoryPerMultiprocessor, g_gpu_as ? g_gpu_as->smem_sm : 0);
    return v;
}

extern "C" const char *gpu_dtype_unavailable(int dtype)
{
    static char why[200];
    int major, minor;
    if (dtype != DT_BF16) return NULL;
    gpu_cc(&major, &minor);
    const int arch = gpu_code_arch();
    if (major >= 8 && arch >= 800) return NULL;
    if (major < 8)
        snprintf(why, sizeof why, "bf16 needs the tensor cores of compute capability 8.0 or newer; this GPU is %d.%d "
                 "(Turing: fp16 tensor cores only, --dtype fp16)", major, minor);
    else /* a compute_75 build on a newer GPU: Turing's code path, whose bf16 products are compiled out */
        snprintf(why, sizeof why, "bf16 needs the tensor cores of compute capability 8.0, and this build runs its "
                 "sm_%d code path here (make CUDA_ARCH=sm_%d%d for this GPU's)", arch / 10, major, minor);
    return why;
}

static char g_refusal[320];
static int g_refusal_quiet, g_refused;
extern "C" void gpu_refuse(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_refusal, sizeof g_refusal, fmt, ap);
    va_end(ap);
    g_refused = 1;
    if (!g_refusal_quiet) fprintf(stderr, "%s: %s\n", g_prog, g_refusal);
}
extern "C" void gpu_refusal_clear(void) { g_refused = 0; }
extern "C" const char *gpu_refused(void) { return g_refused ? g_refusal : NULL; }
extern "C" void report_not_run(const char *name, const char *what)
{
    if (g_refused) report_skip(name, "%s%s", what, g_refusal);
    else report(0, NULL, name, "%sthe launch failed and this GPU refused nothing (its shared memory fits): a failure, "
                "not a SKIP", what);
}
extern "C" const char *gpu_last_refusal(void) { return g_refusal[0] ? g_refusal : "launch refused"; }
extern "C" int gpu_refusals_quiet(int on)
{
    const int was = g_refusal_quiet;
    g_refusal_quiet = on;
    return was;
}

extern "C" const char *gpu_describe(void)
{
    static char buf[768];
    cudaDeviceProp p;
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
    const int arch = gpu_code_arch();
    char code[96];
    snprintf(code, sizeof code, "code path sm_%d%s", arch / 10, g_code_arch[1] ? "a" : "");
    if (!g_gpu_as) {
        snprintf(buf, sizeof buf, "%s, sm_%d%d, %d SMs, %.1f GB, %d KB shared memory per block (opt-in); %s", p.name,
                 p.major, p.minor, p.multiProcessorCount, (double)p.totalGlobalMem / 1e9, gpu_smem_block() / 1024, code);
        return buf;
    }
    snprintf(buf, sizeof buf, "EMULATED %s on %s (sm_%d%d, %d SMs, %.1f GB): compute capability %d.%d, %d KB shared "
             "memory per block, %d KB per SM; %s; the limits and features of that GPU, not its speed", g_gpu_as->label,
             p.name, p.major, p.minor, p.multiProcessorCount, (double)p.totalGlobalMem / 1e9, g_gpu_as->major,
             g_gpu_as->minor, gpu_smem_block() / 1024, gpu_smem_sm() / 1024, code);
    return buf;
}

/* Each allocation's size lives in a small table (device memory has no room
 * for a header that the host can read). The steps hold a handful of buffers
 * (step 05's decode bench some hundreds: copies of small caches, so that L2 holds none of them). */
enum { MAX_LIVE = 1024 };
static void *live_p[MAX_LIVE];
static size_t live_n[MAX_LIVE];
static size_t d_cur, d_peak, d_limit;

extern "C" void *dmalloc_try(size_t bytes)
{
    void *p = NULL;
    int slot = -1;
    for (int i = 0; i < MAX_LIVE && slot < 0; i++)
        if (!live_p[i]) slot = i;
    if (slot < 0) {
        fprintf(stderr, "%s: dmalloc: more than %d live device buffers\n", g_prog, MAX_LIVE);
        exit(1);
    }
    if (d_limit && (d_cur + bytes > d_limit || d_cur + bytes < d_cur)) return NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError(); /* not sticky: clear it and go on */
        return NULL;
    }
    CUDA_CHECK(e);
    live_p[slot] = p;
    live_n[slot] = bytes;
    d_cur += bytes;
    if (d_cur > d_peak) d_peak = d_cur;
    return p;
}

extern "C" const char *dmem_limit_desc(char *buf, size_t n)
{
    char b1[32], b2[32], b3[32];
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b); /* what the device has, not what this program tracks */
    cudaGetLastError();
    if (d_limit)
        snprintf(buf, n, "device limit %s (--mem-limit; the device has %s free of %s)", fmt_bytes((double)d_limit, b1, sizeof b1),
                 fmt_bytes((double)free_b, b2, sizeof b2), fmt_bytes((double)total_b, b3, sizeof b3));
    else
        snprintf(buf, n, "device limit %s (the device's memory, %s of it free)", fmt_bytes((double)total_b, b1, sizeof b1),
                 fmt_bytes((double)free_b, b2, sizeof b2));
    return buf;
}

extern "C" void *dmalloc(size_t bytes, const char *what)
{
    void *p = dmalloc_try(bytes);
    if (!p) {
        char b1[32], b2[32], lim[160];
        fprintf(stderr, "%s: out of device memory: asked for %zu bytes (%s) for %s, %s in use by this program, %s\n", g_prog,
                bytes, fmt_bytes((double)bytes, b1, sizeof b1), what, fmt_bytes((double)d_cur, b2, sizeof b2),
                dmem_limit_desc(lim, sizeof lim));
        exit(EXIT_FAIL);
    }
    return p;
}

extern "C" void dfree(void *p)
{
    if (!p) return;
    for (int i = 0; i < MAX_LIVE; i++)
        if (live_p[i] == p) {
            d_cur -= live_n[i];
            live_p[i] = NULL;
            CUDA_CHECK(cudaFree(p));
            return;
        }
    fprintf(stderr, "%s: dfree: %p was not allocated by dmalloc\n", g_prog, p);
    exit(1);
}

extern "C" size_t dmem_current(void) { return d_cur; }
extern "C" size_t dmem_peak(void) { return d_peak; }
extern "C" void dmem_reset_peak(void) { d_peak = d_cur; }
extern "C" void dmem_set_limit(size_t bytes) { d_limit = bytes; }

extern "C" size_t dmem_device_used(void)
{
    size_t fr = 0, tot = 0;
    CUDA_CHECK(cudaMemGetInfo(&fr, &tot));
    return tot - fr;
}

extern "C" size_t dmem_device_total(void)
{
    size_t fr = 0, tot = 0;
    CUDA_CHECK(cudaMemGetInfo(&fr, &tot));
    return tot;
}

extern "C" void dupload_into(void *d, const float *h, size_t n, int dtype)
{
    size_t esz = dtype_size(dtype);
    if (dtype == DT_FP32) {
        CUDA_WAITED("an upload", cudaMemcpy(d, h, n * esz, cudaMemcpyHostToDevice));
        return;
    }
    uint16_t *t = (uint16_t *)xmalloc(n * esz, "upload");
    for (size_t i = 0; i < n; i++) t[i] = dtype == DT_FP16 ? f32_to_f16(h[i]) : f32_to_bf16(h[i]);
    CUDA_WAITED("an upload", cudaMemcpy(d, t, n * esz, cudaMemcpyHostToDevice));
    tfree(t);
}

extern "C" void *dupload(const float *h, size_t n, int dtype, const char *what)
{
    void *d = dmalloc(n * dtype_size(dtype), what);
    dupload_into(d, h, n, dtype);
    return d;
}

extern "C" void dzero(void *d, size_t bytes) { CUDA_CHECK(cudaMemset(d, 0, bytes)); }

extern "C" void *dupload_bytes(const void *h, size_t bytes, const char *what)
{
    void *d = dmalloc(bytes, what);
    CUDA_WAITED("an upload", cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}

extern "C" void ddownload_bytes(void *h, const void *d, size_t bytes)
{
    CUDA_WAITED("a download", cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
}

extern "C" int *dupload_int(const int *h, size_t n, const char *what) { return (int *)dupload_bytes(h, n * sizeof(int), what); }

extern "C" void ddownload(float *h, const void *d, size_t n, int dtype)
{
    if (dtype == DT_FP32) {
        CUDA_WAITED("a download", cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
        return;
    }
    uint16_t *t = (uint16_t *)xmalloc(n * 2, "download");
    CUDA_WAITED("a download", cudaMemcpy(t, d, n * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) h[i] = dtype == DT_FP16 ? f16_to_f32(t[i]) : bf16_to_f32(t[i]);
    tfree(t);
}

extern "C" void dpoison(void *d, size_t n, int dtype)
{
    /* 0xFF bytes are a NaN in fp32 (0xFFFFFFFF), fp16 (0xFFFF) and bf16 (0xFFFF)
     * alike: exponent all ones, mantissa non-zero. */
    (void)dtype;
    CUDA_CHECK(cudaMemset(d, 0xFF, n * dtype_size(dtype)));
    CUDA_WAITED("a poisoning", cudaDeviceSynchronize());
}

/* --- the timer -----------------------------------------------------------------------------------------------
 *
 * One sample: the GPU is kept busy for SPIN_US by a kernel that only waits, then writes twice its L2's size of
 * memory (so every method, naive included, starts from the same cold L2), then records the start event, runs the
 * method, records the end event. The host queues all of it while the GPU is still waiting, so whatever the host
 * does inside the method (a launcher's checks, an opt-in, a tensor map) overlaps the wait and is never in the
 * sample, and the GPU runs start event, kernels and end event back to back. plots/sdpa_reference.py and
 * plots/sdpa_decode.py time PyTorch the same way (torch.cuda._sleep, then the same flush).
 *
 * Two knobs for the timer's own check (05_cuda_fused/README.md, "How the kernels are timed"): FA_TIMER=idle times
 * the old way (start event, method, end event, with the GPU idle while the host works: what the host spends is in
 * the sample); FA_PLANT_HOST_DELAY_US=N makes the host wait N microseconds inside every timed sample, between the
 * start event and the method, as a slow launcher would. With the default timer that delay must not show. */
enum { SPIN_US = 1000 };

__global__ void timer_spin(unsigned long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

static int g_timer_idle = -1;       /* FA_TIMER=idle */
static long g_planted_us = -1;      /* FA_PLANT_HOST_DELAY_US */
static void *g_flush;               /* twice the L2, written before every sample (not tracked: no step's memory) */
static size_t g_flush_bytes;

static void timer_setup(void)
{
    if (g_timer_idle >= 0) return;
    const char *t = getenv("FA_TIMER"), *d = getenv("FA_PLANT_HOST_DELAY_US");
    if (t && strcmp(t, "idle") != 0 && strcmp(t, "busy") != 0)
        usage_error("FA_TIMER=%s: expected idle (the GPU idles while the host launches) or busy (the default)", t);
    g_timer_idle = t && strcmp(t, "idle") == 0;
    g_planted_us = 0;
    if (d) {
        char *end = NULL;
        errno = 0;
        const long us = strtol(d, &end, 10);
        if (errno || end == d || *end || us < 0 || us > 100000)
            usage_error("FA_PLANT_HOST_DELAY_US=%s: expected an integer in [0, 100000] (microseconds)", d);
        g_planted_us = us;
    }
    if (!g_timer_idle) {
        int dev = 0, l2 = 0;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
        g_flush_bytes = 2 * (size_t)(l2 > 4 << 20 ? l2 : 4 << 20);
        CUDA_CHECK(cudaMalloc(&g_flush, g_flush_bytes));
    }
}

/* The planted delay: the host busy for us microseconds (a slow launcher's work), by the monotonic clock. */
static void host_wait_us(long us)
{
    if (us <= 0) return;
    const double t0 = now_sec();
    while (now_sec() - t0 < us * 1e-6) {
    }
}

/* One timed sample of fn(ctx), in milliseconds. */
static double sample_ms(void (*fn)(void *), void *ctx, cudaEvent_t a, cudaEvent_t b, unsigned round)
{
    if (!g_timer_idle) {
        timer_spin<<<1, 1>>>((unsigned long long)SPIN_US * 1000ull);
        CUDA_CHECK_LAST();
        CUDA_CHECK(cudaMemsetAsync(g_flush, (int)(round & 0xff), g_flush_bytes, 0));
    }
    CUDA_CHECK(cudaEventRecord(a));
    host_wait_us(g_planted_us);
    fn(ctx);
    CUDA_CHECK(cudaEventRecord(b));
    CUDA_WAITED("a timed sample", cudaEventSynchronize(b));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms;
}

extern "C" double gpu_time_median_ms(void (*fn)(void *), void *ctx, int warmup, int repeat)
{
    static unsigned round;
    double t[1000];
    cudaEvent_t a, b;
    if (repeat > 1000) repeat = 1000;
    if (repeat < 1) repeat = 1;
    timer_setup();
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    for (int w = 0; w < warmup; w++) fn(ctx);
    CUDA_WAITED("the timer's warm-up", cudaDeviceSynchronize());
    for (int r = 0; r < repeat; r++) t[r] = sample_ms(fn, ctx, a, b, round++);
    CUDA_CHECK(cudaEventDestroy(a));
    CUDA_CHECK(cudaEventDestroy(b));
    return median(t, repeat);
}

extern "C" void gpu_time_interleaved_ms(void (*const *fn)(void *), void *const *ctx, int n, int warmup, int repeat,
                                        double *ms)
{
    if (repeat < 1) repeat = 1;
    double *t = (double *)xmalloc((size_t)n * repeat * sizeof *t, "times");
    for (int m = 0; m < n; m++) gpu_time_median_ms(fn[m], ctx[m], warmup, 1); /* warm-ups, and one run discarded */
    for (int rep = 0; rep < repeat; rep++)
        for (int m = 0; m < n; m++) t[m * repeat + rep] = gpu_time_median_ms(fn[m], ctx[m], 0, 1);
    for (int m = 0; m < n; m++) ms[m] = median(t + m * repeat, repeat);
    tfree(t);
}

extern "C" void gpu_sync_check(void) { CUDA_WAITED("a sync", cudaDeviceSynchronize()); }

struct GpuGraph { cudaGraph_t graph; cudaGraphExec_t exec; };

extern "C" GpuGraph *gpu_graph_capture(void (*fn)(void *ctx, void *stream), void *ctx)
{
    GpuGraph *g = (GpuGraph *)xmalloc(sizeof *g, "a CUDA graph");
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    /* relaxed: the launchers read device attributes and encode tensor maps on the host while capturing */
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    fn(ctx, s);
    CUDA_CHECK(cudaStreamEndCapture(s, &g->graph));
    CUDA_CHECK(cudaGraphInstantiate(&g->exec, g->graph, 0));
    CUDA_CHECK(cudaStreamDestroy(s));
    return g;
}

extern "C" void *gpu_stream_create(void)
{
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return (void *)s;
}

extern "C" void gpu_stream_destroy(void *s) { CUDA_CHECK(cudaStreamDestroy((cudaStream_t)s)); }

extern "C" void gpu_graph_replay(void *g) { CUDA_CHECK(cudaGraphLaunch(((GpuGraph *)g)->exec, 0)); }

extern "C" void gpu_graph_free(GpuGraph *g)
{
    if (!g) return;
    CUDA_CHECK(cudaGraphExecDestroy(g->exec));
    CUDA_CHECK(cudaGraphDestroy(g->graph));
    tfree(g);
}
