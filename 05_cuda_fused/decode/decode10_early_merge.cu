/*
 * Decode kernel 10: the merge launched early.
 *
 * Extends decode kernel 9 (decode09_merge_in_flight.cu). The idea: split-KV is two launches, the split kernel, whose
 * Sb blocks per row leave their states (m_s, l_s, o_s) in the workspace, then decode_merge, one block per new row.
 * Launched the usual way, the second kernel's blocks are placed only once the first kernel has ended: the GPU waits
 * for the split's last block, then for the merge's launch and its blocks' start, then for their loads. Kernel 10
 * launches decode_merge as a programmatic dependent of the split kernel (cudaLaunchKernelEx with
 * cudaLaunchAttributeProgrammaticStreamSerialization; Hopper's griddepcontrol): every split block says at its start
 * that the dependent may be scheduled, so that once the split's last block is resident the merge's blocks are placed
 * beside it, read the sequence lengths, and wait in griddepcontrol.wait, which returns when the split kernel has
 * completed and its writes are visible. The merge is kernel 9's, the same sums in the same order: O is kernel 9's bit
 * for bit.
 * Why: at B = 1, 32 query heads over 8 KV heads (S = 32), kernel 9's whole step takes 17-46 us (L = 2048 to 32768),
 * and the microseconds between the two kernels are part of it.
 * What it costs: the merge's blocks hold warp slots (4 warps each, no shared memory) while they wait; one more
 * instruction in each split block; the launch through cudaLaunchKernelEx. Nothing where S = 1 (B = 64: no merge).
 * Measured: H200, fp16, D = 128, B = 1, 32/8 heads: +2% to +4% over kernel 9 (L = 1024 11.7 us against 12.2); 32
 * heads +0.5% to +6%; B = 64 level; the runs, and a design without a merge kernel that lost: RESULTS.md#decode-10.
 */
#ifndef RUNG
#define RUNG 10          // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "decode09_merge_in_flight.cu"

// --- the idea -------------------------------------------------------------------------------------

/* Programmatic dependent launch (sm_90; PTX griddepcontrol). The split kernel's blocks each say at their start that
 * the merge kernel, launched after it with the programmatic-serialization attribute, may be scheduled; once every
 * split block has said so (is resident or done), the merge kernel's blocks are placed on the SMs beside them and wait
 * in griddepcontrol.wait, which returns when the split kernel has completed and its writes are visible. So the
 * merge's launch and its blocks' start run under the split's last blocks. Elsewhere (sm_75, sm_80 builds) both are
 * empty: kernel 10 runs only where decode kernel 8's copy engine does. */
__device__ __forceinline__ void dec_launch_dependents()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void dec_wait_prerequisite()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

/* decode_merge launched while the split kernel runs: it reads the lengths (the split kernel's input) first, then
 * waits for the states. */
struct DecMergeEarly : DecMerge8 {
    static __device__ __forceinline__ void wait_for_states() { dec_wait_prerequisite(); }
};

/* A merge kernel's launch as a programmatic dependent of the kernel before it on stream s: a block per row, D threads,
 * smem bytes of shared memory. */
template <typename T>
static void dec_launch_early(void (*merge)(DecParams<T>), const DecParams<T> &p, size_t rows_total, int D, size_t smem,
                             cudaStream_t s)
{
    cudaLaunchAttribute early[1];
    early[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    early[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)rows_total);
    cfg.blockDim = dim3(D);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cfg.attrs = early;
    cfg.numAttrs = 1;
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, merge, p));
}

struct Dec10EarlyMerge : Dec9Merge8 {
    static __device__ __forceinline__ void at_start() { dec_launch_dependents(); } // the merge may take its place now
    using Merge = DecMergeEarly;
    template <class P, int D, typename T>
    static void after(const DecParams<T> &p, const DecGrid &gr, size_t rows_total, cudaStream_t s)
    {
        if (gr.S > 1) dec_launch_early(decode_merge<D, T, typename P::Merge>, p, rows_total, D, 0, s);
    }
    static const char *merge_words(const DecGrid &gr) { return gr.S == 1 ? "" : ", then the merge kernel, launched early"; }
};

// --- the launcher ---------------------------------------------------------------------------------

#if RUNG == 10
static int dk10_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec10EarlyMerge>(10, a, ws, s); }
static size_t dk10_workspace(const DecodeArgs *a) { return dec_workspace<Dec10EarlyMerge>(a); }
static void dk10_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec10EarlyMerge>(a, buf, n); }

static const DecodeKernel decode10 = {
    .id = 10, .extends = 9, .name = "early merge",
    .idea = "the merge kernel launched while the split runs, waiting for its states",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = dec_supports, .paged = 1,
    .workspace = dk10_workspace, .launch = dk10_launch, .describe = dk10_describe,
    .unavailable = dec_bulk_unavailable,
    .same_sums = "the merge kernel launched early (waiting in griddepcontrol.wait) against it launched after the split kernel",
};
DECODE_REGISTER(decode10);
#endif
