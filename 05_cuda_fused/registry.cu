/*
 * registry.cu: the lists of step 05's kernels, filled before main runs by FUSED_REGISTER in each
 * forward/kernelNN_*.cu, FP8_REGISTER in each fp8/kernelNN_*.cu, BWD_REGISTER in each backward/bwdNN_*.cu and
 * DECODE_REGISTER in each decode/decodeNN_*.cu.
 */
#include "gpu.cuh"
#include "kernels.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

/* One list of one kind of kernel, kept in id order: the three lists below are this, for their three types. */
template <typename K> struct Registry {
    const K *k[MAX_KERNELS];
    int n;
    int add(const K *x, const char *what)
    {
        if (n == MAX_KERNELS) {
            fprintf(stderr, "%s: more than %d kernels\n", what, MAX_KERNELS);
            exit(1);
        }
        if (strchr(x->name, ',')) {   /* the name is a column of the --csv files, written unquoted */
            fprintf(stderr, "%s: kernel %d's name '%s' has a comma\n", what, x->id, x->name);
            exit(1);
        }
        int i = n++;
        while (i > 0 && k[i - 1]->id > x->id) { /* keep id order */
            k[i] = k[i - 1];
            i--;
        }
        k[i] = x;
        return i;
    }
    const K *find(int id) const
    {
        for (int i = 0; i < n; i++)
            if (k[i]->id == id) return k[i];
        return nullptr;
    }
};

/* Function-local statics: filled by the kernel files' static initialisers, in whatever order those run. */
static Registry<FusedKernel> &fused() { static Registry<FusedKernel> r; return r; }
static Registry<BackwardKernel> &bwd() { static Registry<BackwardKernel> r; return r; }
static Registry<DecodeKernel> &dec() { static Registry<DecodeKernel> r; return r; }
static Registry<Fp8Kernel> &fp8() { static Registry<Fp8Kernel> r; return r; }

int fused_register(const FusedKernel *k) { return fused().add(k, "fused_register"); }
const FusedKernel *const *fused_kernels(int *n_out) { *n_out = fused().n; return fused().k; }
const FusedKernel *fused_kernel(int id) { return fused().find(id); }

int bwd_register(const BackwardKernel *k) { return bwd().add(k, "bwd_register"); }
const BackwardKernel *const *bwd_kernels(int *n_out) { *n_out = bwd().n; return bwd().k; }
const BackwardKernel *bwd_kernel(int id) { return bwd().find(id); }

int decode_register(const DecodeKernel *k) { return dec().add(k, "decode_register"); }
const DecodeKernel *const *decode_kernels(int *n_out) { *n_out = dec().n; return dec().k; }
const DecodeKernel *decode_kernel(int id) { return dec().find(id); }

int fp8_register(const Fp8Kernel *k) { return fp8().add(k, "fp8_register"); }
const Fp8Kernel *const *fp8_kernels(int *n_out) { *n_out = fp8().n; return fp8().k; }
const Fp8Kernel *fp8_kernel(int id) { return fp8().find(id); }

/* --- which kernels launch here -------------------------------------------------------------
 *
 * A kernel's shared memory depends on D and the dtype, never on N: one launch on a small problem (B = H = 1,
 * N = 65) tells whether this GPU, or the --gpu-as GPU, takes it. The pickers (the backward's forward that writes
 * L, step 06's training kernels) take the highest-numbered kernel that fits, instead of one that would be refused
 * at the size that matters. The answer is kept per (kernel, dtype, D). Buffers come from cudaMalloc, not the
 * tracked allocator: the probe is not part of any peak that a step reports. */
enum { FIT_N = 65 };

static void *fit_alloc(size_t bytes)
{
    void *p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
    CUDA_CHECK(cudaMemset(p, 0, bytes ? bytes : 1));
    return p;
}

static int fit_probe(int backward, const void *kernel, int dtype, long D)
{
    const size_t n = (size_t)FIT_N * D, b = n * dtype_size(dtype);
    void *t[8];
    for (int i = 0; i < 8; i++) t[i] = fit_alloc(b);
    float *L = (float *)fit_alloc(FIT_N * sizeof(float));
    const int was_quiet = gpu_refusals_quiet(1);
    gpu_refusal_clear();
    int rc;
    if (!backward) {
        const FusedKernel *k = (const FusedKernel *)kernel;
        rc = k->launch_l ? k->launch_l(t[0], t[1], t[2], t[3], L, 1, 1, FIT_N, D, dtype, 0, nullptr)
                         : k->launch(t[0], t[1], t[2], t[3], 1, 1, FIT_N, D, dtype, 0, nullptr);
    } else {
        const BackwardKernel *k = (const BackwardKernel *)kernel;
        const size_t wsb = k->workspace(1, 1, FIT_N, D, dtype);
        void *ws = fit_alloc(wsb);
        rc = k->launch(t[0], t[1], t[2], t[3], t[4], L, t[5], t[6], t[7], ws, 1, 1, FIT_N, D, dtype, 0, nullptr);
        CUDA_WAITED("a fit run", cudaDeviceSynchronize());
        CUDA_CHECK(cudaFree(ws));
    }
    gpu_refusals_quiet(was_quiet);
    CUDA_WAITED("a fit run", cudaDeviceSynchronize());
    for (int i = 0; i < 8; i++) CUDA_CHECK(cudaFree(t[i]));
    CUDA_CHECK(cudaFree(L));
    /* Only a refusal means "does not fit": a launch that failed otherwise is said to fit, so that the caller's
     * own launch fails and is reported as the failure it is, never as a SKIP. */
    return rc == 0 || !gpu_refused();
}

static int fits(int backward, int id, const void *kernel, int dtype, long D)
{
    /* D = 16 .. MAX_FIT_D in steps of 16: 0 not asked, 1 fits, 2 not */
    static signed char known[2][MAX_FIT_ID + 1][DT_COUNT][MAX_FIT_D / 16 + 1];
    static struct { int backward, id, dtype; long D; char why[320]; } no[64];   /* the refusals' words, kept */
    static int n_no;
    if (id < 0 || id > MAX_FIT_ID || dtype < 0 || dtype >= DT_COUNT || D < 16 || D > MAX_FIT_D || D % 16)
        return fit_probe(backward, kernel, dtype, D);
    signed char *k = &known[backward][id][dtype][D / 16];
    if (!*k) {
        *k = fit_probe(backward, kernel, dtype, D) ? 1 : 2;
        if (*k == 2 && n_no < 64) {
            no[n_no].backward = backward, no[n_no].id = id, no[n_no].dtype = dtype, no[n_no].D = D;
            snprintf(no[n_no++].why, sizeof no[0].why, "%s", gpu_refused());
        }
    } else if (*k == 2) { /* an answer from before: its refusal's words again, so that the caller's SKIP line is this kernel's */
        for (int i = 0; i < n_no; i++)
            if (no[i].backward == backward && no[i].id == id && no[i].dtype == dtype && no[i].D == D) {
                const int was_quiet = gpu_refusals_quiet(1);
                gpu_refuse("%s", no[i].why);
                gpu_refusals_quiet(was_quiet);
            }
    }
    return *k == 1;
}

int fused_fits(const FusedKernel *k, int dtype, long D) { return fits(0, k->id, k, dtype, D); }
int bwd_fits(const BackwardKernel *k, int dtype, long D) { return fits(1, k->id, k, dtype, D); }
