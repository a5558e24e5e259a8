/*
 * Extends: decode07_lean_copies.cu; idea: the K/V tiles brought by the copy engine, one 4 KB box per 16-key quarter, counted on an mbarrier
 * Code: decode.cuh with SPLIT = true, GROUPED = true, PAGED = true, NST = 3, OCC = true, LEAN = true, BULK = true
 *
 * Decode kernel 8: bulk copies. Kernel 7 cut the address arithmetic of kernel 6's copies, and still every
 * thread of the block issues 16 cp.async of 16 bytes per tile at D = 128, then the block waits on its own copies
 * (cp.async.wait_group) and meets at a __syncthreads before it may read the tile. Hopper's copy engine (TMA) takes a
 * whole 16-key quarter of K (or V) in one request: the cache, paged or not, is a tensor of rows of D elements, a
 * quarter is 16 consecutive rows of it (one page holds it), and one box of 16 rows x D columns (4 KB at D = 128)
 * lands in shared memory with the 128-byte swizzle that keeps ldmatrix free of bank conflicts without the pad row
 * of kernels 2-7 (dec_at). Lanes 0-7 of warp 0 issue a tile's 8 boxes, lane 0 tells the stage's mbarrier the bytes
 * to expect, and every warp waits on the mbarrier's phase: warps 1-3 spend no issue slot on the stream. The math
 * after the copy is kernel 7's, the same keys in the same order: O is the same to the bit.
 *
 * Found by measuring, one change at a time, on the H200 at B = 64, 32 heads, L = 2048 (2.15 GB, two stages; GB/s,
 * kernel 7 in the same runs at 4169-4244, the read bandwidth probe at 4346-4485): one cp.async.bulk per 256-byte
 * row, 128 requests a tile issued by warp 0: 2279; the same rows issued by all four warps, one a lane: 3998; rows
 * copied 8 or 16 at a time (2 KB and 4 KB requests; timing only, the pad breaks the layout): 4560 and 4581. The
 * size of each request, not the instructions around it, is what the copy engine needs. Then the real layout: boxes
 * of 16 rows x 64 columns, swizzled, with the L2 promotion to 256 bytes kernels 11-21 use: 4055; without promotion
 * 4343-4422; one box of all D columns (the tensor seen as [rows][D / 64][64]): 4483; that box marked evict-first in
 * L2 (each byte is read once): 4500, kernel 8.
 *
 * What it costs: sm_90 and later (cp.async.bulk.tensor, mbarrier byte counts; elsewhere a SKIP line); a tensor
 * map of K and V made on the host (a driver call, the last four kept); keys past len arrive with whatever the
 * cache holds there and are zeroed by the block before the math (a NaN in an unwritten slot would otherwise turn p
 * = 0 times V into NaN: the checks now fill every unread slot of the cache with NaN). Little or nothing where a
 * launch is too short for the stream to matter: L = 1024, 32 heads, 14.3 us against kernel 7's 14.8; 32/8 heads
 * 11.9 against 11.6.
 *
 * Measured on the H200 (2026-11-26, `./step05 --decode --bench`, fp16, D = 128, one new row, pages of 64, the
 * kernels interleaved; read bandwidth 4408 GB/s in the run): B = 64, 32 heads, L = 2048: 488.4 us against kernel
 * 7's 525.9 (+7.7%), 4397 GB/s, 100% of the read bandwidth; B = 1, 32 heads, L = 131072: 493.3 against 532.0 (+7.8%,
 * 99%); L = 32768: 132.0 against 142.3 (+7.8%); grouped 32/8 heads, L = 32768: 44.4 against 47.9; B = 8, 32/8, L =
 * 8192: 70.8 against 75.6. cuDNN in the same call (plots/sdpa_decode.py): 488.0, 486.4, 132.1, 40.4 and 70.6 us:
 * level at B = 64, L = 32768 and B = 8, 1.4% behind at L = 131072, 10% behind grouped at L = 32768.
 */
#include "decode.cuh"

typedef DecodeFlags<true, true, true, 3, true, true, true> Dec8;

static int dk8_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec8>(8, a, ws, s); }
static size_t dk8_workspace(const DecodeArgs *a) { return dec_workspace<Dec8>(a); }
static void dk8_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec8>(a, buf, n); }

/* Whether this binary holds sm_90-or-later code for this GPU: a one-thread probe compiled as the kernel is. */
__global__ void dec_bulk_probe(int *ok)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    *ok = 1;
#else
    *ok = 0;
#endif
}

/* NULL where decode kernels 8 to 13 run, else one line why not (decode.cuh declares it). */
const char *dec_bulk_unavailable(void)
{
    static int state = -1; /* -1 not asked yet, 0 runs here, 1 does not */
    static char why[220];
    if (state < 0) {
        int major = 0, minor = 0;
        gpu_cc(&major, &minor); /* the --gpu-as GPU's, when one is emulated */
        const int ok = major >= 9 && gpu_probe(dec_bulk_probe);
        state = !ok;
        if (!ok)
            snprintf(why, sizeof why, "decode kernels 8-13's copy-engine boxes (cp.async.bulk.tensor, mbarrier byte counts) "
                     "need compute capability 9.0 or later and a build for it (this GPU: %d.%d)", major, minor);
    }
    return state ? why : NULL;
}

static const DecodeKernel decode8 = {
    .id = 8, .extends = 7, .name = "bulk copies",
    .idea = "K/V rows by the copy engine, one bulk copy a row, an mbarrier a stage",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = dec_supports, .paged = 1,
    .workspace = dk8_workspace, .launch = dk8_launch, .describe = dk8_describe, .unavailable = dec_bulk_unavailable,
};
DECODE_REGISTER(decode8);
