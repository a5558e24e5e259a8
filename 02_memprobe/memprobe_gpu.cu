/*
 * memprobe_gpu.cu: step 02 on the GPU, the chapter's probe as the chapter
 * wrote it (fp16, B=2, H=8, D=64), naive cuBLAS attention (step 01) against
 * step 05's fused kernel, N = 1024 .. 65536.
 *
 * Every device buffer comes from the tracked allocator (dmalloc_try), so
 * "peak" is exactly what the method asked for; cudaMemGetInfo's view of the
 * whole device (the CUDA context, cuBLAS's workspace and all) is printed
 * beside it. A cudaMalloc that fails (or that --mem-limit refuses) is a row
 * marked OOM, and the sweep goes on: cudaErrorMemoryAllocation is not sticky.
 */
#include <cmath>
#include <cstring>

#include "gpu.cuh"
#include "memprobe.h"
#include "../01_naive/naive.h"
#include "../05_cuda_fused/kernels.h"

/* The fused kernel the probe uses: the highest-numbered one that runs this
 * dtype at this D on this GPU, its shared memory included (in fp16, a tensor-core
 * kernel; in fp32, kernel 2). */
static const FusedKernel *pick_fused(int dtype, long D)
{
    int nk;
    const FusedKernel *const *ks = fused_kernels(&nk);
    const FusedKernel *best = NULL;
    for (int i = 0; i < nk; i++)
        if ((ks[i]->dtypes & (1u << dtype)) && ks[i]->supports_dim(D) && !FUSED_UNAVAILABLE(ks[i]) &&
            fused_fits(ks[i], dtype, D))
            best = ks[i];
    return best;
}

/* Max |O - reference| over a few rows of head 0, so that the probe never
 * measures a kernel that computes garbage. */
static double spot_check(const float *q, const float *k, const float *v, const void *dout, long N, long D, int dtype)
{
    const long rows[4] = {0, N / 3, N / 2, N - 1};
    double *ref = (double *)xmalloc((size_t)D * sizeof(double), "ref row"), mx = 0;
    double *scratch = (double *)xmalloc((size_t)N * sizeof(double), "scores");
    float *got = (float *)xmalloc((size_t)D * 4, "row");
    for (int t = 0; t < 4; t++) {
        ddownload(got, (const char *)dout + (size_t)rows[t] * D * dtype_size(dtype), (size_t)D, dtype);
        ref_attention_row(q, k, v, N, D, 0, rows[t], scratch, ref);
        for (long d = 0; d < D; d++) {
            double e = fabs((double)got[d] - ref[d]);
            if (!(e <= mx)) mx = e; /* NaN propagates */
        }
    }
    tfree(ref); tfree(scratch); tfree(got);
    return mx;
}

/* One N: inputs once, then naive (S and P), then fused. */
static void probe_n(const Opts *o, long N, const FusedKernel *fk, ProbeRow *nr, ProbeRow *fr, int verbose_check)
{
    const size_t esz = dtype_size(o->dtype), n = (size_t)o->B * o->H * N * o->D;
    const size_t io = 4 * n * esz, sp = (size_t)o->B * o->H * N * N * esz;
    memset(nr, 0, sizeof *nr);
    memset(fr, 0, sizeof *fr);
    nr->N = fr->N = N;
    nr->method = "naive";
    fr->method = "fused";
    nr->need_bytes = io + 2 * sp;
    fr->need_bytes = io; /* the fused kernels allocate nothing: m and l live in registers */

    dmem_reset_peak();
    void *dq = dmalloc_try(n * esz), *dk = dq ? dmalloc_try(n * esz) : NULL, *dv = dk ? dmalloc_try(n * esz) : NULL;
    void *dout = dv ? dmalloc_try(n * esz) : NULL;
    if (!dout) { /* even Q, K, V, O do not fit */
        dfree(dq); dfree(dk); dfree(dv);
        nr->oom = fr->oom = 1;
        return;
    }
    float *q = (float *)xmalloc(n * 4, "Q"), *k = (float *)xmalloc(n * 4, "K"), *v = (float *)xmalloc(n * 4, "V");
    make_qkv(q, k, v, n, o->seed + (uint64_t)N);
    round_to_dtype(q, n, o->dtype); round_to_dtype(k, n, o->dtype); round_to_dtype(v, n, o->dtype);
    dupload_into(dq, q, n, o->dtype);
    dupload_into(dk, k, n, o->dtype);
    dupload_into(dv, v, n, o->dtype);

    /* naive: S and P from the tracked allocator, then the three launches */
    dmem_reset_peak();
    void *S = dmalloc_try(sp), *P = S ? dmalloc_try(sp) : NULL;
    if (!P) {
        dfree(S);
        nr->oom = 1;
    } else {
        cudaEvent_t a, b;
        float ms = 0;
        CUDA_CHECK(cudaEventCreate(&a)); CUDA_CHECK(cudaEventCreate(&b));
        naive_attention_gpu_ws(dq, dk, dv, dout, o->B, o->H, N, o->D, o->dtype, 0, S, P, NULL); /* warm-up (cuBLAS's first call) */
        dpoison(dout, n, o->dtype);
        CUDA_CHECK(cudaEventRecord(a));
        naive_attention_gpu_ws(dq, dk, dv, dout, o->B, o->H, N, o->D, o->dtype, 0, S, P, NULL);
        CUDA_CHECK(cudaEventRecord(b));
        CUDA_WAITED("a timed sample", cudaEventSynchronize(b));
        CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
        CUDA_CHECK(cudaEventDestroy(a)); CUDA_CHECK(cudaEventDestroy(b));
        nr->ms = ms;
        nr->peak_bytes = dmem_peak();      /* Q, K, V, O (held at the reset) + S + P */
        nr->rss_bytes = dmem_device_used(); /* the whole device's view, S and P still held */
        nr->max_diff = spot_check(q, k, v, dout, N, o->D, o->dtype);
        dfree(P); dfree(S);
    }

    /* fused: nothing beyond Q, K, V, O */
    if (!fk) {
        fr->oom = 1;
    } else {
        cudaEvent_t a, b;
        float ms = 0;
        dmem_reset_peak();
        CUDA_CHECK(cudaEventCreate(&a)); CUDA_CHECK(cudaEventCreate(&b));
        if (fk->launch(dq, dk, dv, dout, o->B, o->H, N, o->D, o->dtype, 0, NULL) != 0) exit(EXIT_FAIL); /* warm-up */
        dpoison(dout, n, o->dtype);
        CUDA_CHECK(cudaEventRecord(a));
        if (fk->launch(dq, dk, dv, dout, o->B, o->H, N, o->D, o->dtype, 0, NULL) != 0) exit(EXIT_FAIL);
        CUDA_CHECK(cudaEventRecord(b));
        CUDA_WAITED("a timed sample", cudaEventSynchronize(b));
        CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
        CUDA_CHECK(cudaEventDestroy(a)); CUDA_CHECK(cudaEventDestroy(b));
        fr->ms = ms;
        fr->peak_bytes = dmem_peak();      /* the reset set it to what is held: Q, K, V, O */
        fr->rss_bytes = dmem_device_used();
        fr->max_diff = spot_check(q, k, v, dout, N, o->D, o->dtype);
    }
    (void)verbose_check;
    dfree(dq); dfree(dk); dfree(dv); dfree(dout);
    tfree(q); tfree(k); tfree(v);
}

extern "C" int memprobe_gpu(const Opts *o, const long *Ns, int nN, size_t mem_limit, FILE *csv)
{
    char b1[32], b2[32];
    const FusedKernel *fk = pick_fused(o->dtype, o->D);
    dmem_set_limit(mem_limit);
    printf("step02: memory probe on the GPU, %s, B=%ld H=%ld D=%ld\n", dtype_name(o->dtype), o->B, o->H, o->D);
    printf("device: %s\n", gpu_describe());
    printf("limit: %s; fused kernel: %s\n",
           mem_limit ? fmt_bytes((double)mem_limit, b1, sizeof b1) : "the device's own memory",
           fk ? fk->name : "none for this dtype (only naive is probed)");
    if (fk) printf("(kernel %d: %s)\n", fk->id, fk->idea);
    probe_print_header("(peak = tracked cudaMalloc; other view = cudaMemGetInfo used, whole device)");
    ProbeRow nr[32], fr[32];
    int bad = 0;
    for (int i = 0; i < nN; i++) {
        probe_n(o, Ns[i], fk, &nr[i], &fr[i], 0);
        probe_print_row(&nr[i], csv, "gpu", dtype_name(o->dtype), o, mem_limit);
        probe_print_row(&fr[i], csv, "gpu", dtype_name(o->dtype), o, mem_limit);
        const double tol = o->dtype == DT_FP32 ? 1e-4 : 2e-2;
        if ((!nr[i].oom && !(nr[i].max_diff < tol)) || (!fr[i].oom && !(fr[i].max_diff < tol))) {
            printf("  WRONG output at N = %ld: max |O - reference| naive %.2e, fused %.2e\n", Ns[i], nr[i].max_diff, fr[i].max_diff);
            bad = 1;
        }
        if (i > 0 && !nr[i].oom && !nr[i - 1].oom && !fr[i].oom && !fr[i - 1].oom)
            printf("%7s  naive peak grew %.2fx, fused %.2fx for a %.0fx longer sequence\n", "",
                   (double)nr[i].peak_bytes / nr[i - 1].peak_bytes, (double)fr[i].peak_bytes / fr[i - 1].peak_bytes,
                   (double)Ns[i] / Ns[i - 1]);
    }
    dmem_set_limit(0);
    printf("\n");
    probe_answers(nr, fr, nN, mem_limit ? mem_limit : dmem_device_total(), "fused kernel");
    printf("(naive needs 2*B*H*N*N*%zu bytes for S and P: %s at N = %ld)\n", dtype_size(o->dtype),
           fmt_bytes(2.0 * o->B * o->H * Ns[nN - 1] * Ns[nN - 1] * dtype_size(o->dtype), b2, sizeof b2), Ns[nN - 1]);
    return bad ? EXIT_FAIL : EXIT_OK;
}

extern "C" void memprobe_gpu_checks(void)
{
    Opts o;
    memset(&o, 0, sizeof o);
    o.B = 1; o.H = 2; o.D = 64; o.dtype = DT_FP32; o.seed = 3;
    const FusedKernel *fk = pick_fused(DT_FP32, 64);
    ProbeRow nr[2], fr[2];
    const long Ns[2] = {256, 512};
    const size_t io512 = 4 * (size_t)2 * 512 * 64 * 4, sp512 = 2 * (size_t)2 * 512 * 512 * 4;
    dmem_set_limit(io512 + sp512 / 2); /* room for N = 256 whole, not for naive at N = 512 */
    for (int i = 0; i < 2; i++) probe_n(&o, Ns[i], fk, &nr[i], &fr[i], 1);
    dmem_set_limit(0);
    report(!nr[0].oom && nr[0].peak_bytes == nr[0].need_bytes, NULL, "probe-gpu/naive-peak-exact",
           "naive at N=256: tracked peak %zu = Q,K,V,O + S,P %zu", nr[0].peak_bytes, nr[0].need_bytes);
    report(nr[1].oom, NULL, "probe-gpu/naive-oom", "naive at N=512 refused under the limit (needs %zu)", nr[1].need_bytes);
    report(fk && !fr[1].oom && fr[1].peak_bytes == fr[1].need_bytes && fr[1].max_diff < 1e-4, NULL, "probe-gpu/fused-runs",
           "fused kernel at N=512 ran under the same limit, peak %zu = Q,K,V,O, max err %.1e", fr[1].peak_bytes, fr[1].max_diff);
}
