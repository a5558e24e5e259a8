/*
 * tma_map.cuh: the host side of Hopper's copy engine (the TMA) for the forward kernels from 11, the FP8
 * kernels, backward kernels 5-20 and decode kernel 8: K or V (or Q and dO) as a tensor map the TMA reads
 * boxes of. wgmma.cuh has the device side: tma_load_3d and the mbarriers.
 *
 * A tensor map is 128 bytes made on the host by the driver's
 * cuTensorMapEncodeTiled (reached through cudaGetDriverEntryPointByVersion,
 * so the program needs no -lcuda) and passed to the kernel by value as a
 * __grid_constant__ parameter. It says the tensor's shape and strides, the box
 * one copy brings (box_rows keys x 64 columns: the 128-byte swizzle takes
 * boxes 64 two-byte columns wide, so D = 128 is two boxes), and the swizzle
 * the box lands in: CU_TENSOR_MAP_SWIZZLE_128B, kernel 10's layout. Rows past
 * N arrive as zeros.
 */
#ifndef TMA_MAP_CUH
#define TMA_MAP_CUH

#include <cuda.h>
#include <cudaTypedefs.h>

#include "gpu.cuh"
#if __has_include(<nvtx3/nvToolsExtMemCudaRt.h>)
#include <nvtx3/nvToolsExtMemCudaRt.h> // NVTX's memory API (header only): tma_stores_written below
#define TMA_HAVE_NVTX_MEM 1
#endif

/* The driver's cuTensorMapEncodeTiled, looked up once; NULL after one line naming who asked. */
static inline PFN_cuTensorMapEncodeTiled_v12000 tma_encoder(const char *who)
{
    static PFN_cuTensorMapEncodeTiled_v12000 encode = NULL;
    if (!encode) {
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", (void **)&encode, 12000, cudaEnableDefault, &q) !=
                cudaSuccess ||
            q != cudaDriverEntryPointSuccess || !encode) {
            fprintf(stderr, "%s: %s: the driver has no cuTensorMapEncodeTiled\n", g_prog, who);
            encode = NULL;
        }
    }
    return encode;
}

/* A 3-D tensor map (dims[0] innermost, strides in bytes for dims 1 and 2) with the given box, swizzle and L2
 * promotion, rows outside the tensor arriving as zeros: the one call every map below makes. 0, or -1 after one line
 * naming who asked. */
static inline int tma_encode_3d(CUtensorMap *map, CUtensorMapDataType type, const void *base, const cuuint64_t *dims,
                                const cuuint64_t *strides, const cuuint32_t *box, CUtensorMapSwizzle swz,
                                CUtensorMapL2promotion l2, const char *who)
{
    PFN_cuTensorMapEncodeTiled_v12000 encode = tma_encoder(who);
    if (!encode) return -1;
    const cuuint32_t one[3] = {1, 1, 1};
    const CUresult r = encode(map, type, 3, const_cast<void *>(base), dims, strides, box, one, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              swz, l2, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "%s: %s: cuTensorMapEncodeTiled failed (CUresult %d)\n", g_prog, who, (int)r);
        return -1;
    }
    return 0;
}

/* Bytes [BH][rows][cols] (the FP8 kernels' K and V^T) as a tensor map with a box of box_cols x box_rows and the
 * given swizzle; 0, or -1 after one line. */
static inline int tma_map_bytes(CUtensorMap *map, const void *base, long BH, long rows, long cols, int box_cols, int box_rows,
                                CUtensorMapSwizzle swz, const char *who)
{
    const cuuint64_t dims[3] = {(cuuint64_t)cols, (cuuint64_t)rows, (cuuint64_t)BH};
    const cuuint64_t strides[2] = {(cuuint64_t)cols, (cuuint64_t)(rows * cols)};
    const cuuint32_t box[3] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows, 1};
    return tma_encode_3d(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, base, dims, strides, box, swz, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, who);
}

/* K and V (the backward: also Q and dO, as .k and .v), [B*H][N][D] in dtype, as two tensor maps. The last pair made is
 * kept (per kernel and D: each caller has its own static KvMaps): the bench
 * launches the same tensors many times and encoding costs a driver call. */
struct KvMaps {
    CUtensorMap k, v;
    const void *ck = nullptr, *cv = nullptr;
    long cBH = -1, cN = -1, cD = -1;
    int cdt = -1, crows = -1;

    /* 0, or -1 after one line naming who (the kernel) asked. */
    int get(const void *kp, const void *vp, long BH, long N, long D, int box_rows, int dtype, const char *who)
    {
        if (kp == ck && vp == cv && BH == cBH && N == cN && D == cD && dtype == cdt && box_rows == crows) return 0;
        if (make(&k, kp, BH, N, D, box_rows, dtype, who) || make(&v, vp, BH, N, D, box_rows, dtype, who)) {
            ck = cv = nullptr;
            return -1;
        }
        ck = kp, cv = vp, cBH = BH, cN = N, cD = D, cdt = dtype, crows = box_rows;
        return 0;
    }

    static int make(CUtensorMap *map, const void *base, long BH, long N, long D, int box_rows, int dtype, const char *who)
    {
        const cuuint64_t dims[3] = {(cuuint64_t)D, (cuuint64_t)N, (cuuint64_t)BH};
        const cuuint64_t strides[2] = {(cuuint64_t)D * 2, (cuuint64_t)N * D * 2}; /* bytes, dims 1 and 2 */
        const cuuint32_t box[3] = {64, (cuuint32_t)box_rows, 1};
        return tma_encode_3d(map, dtype == DT_FP16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, base,
                             dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, who);
    }
};

/* compute-sanitizer's initcheck does not count what a TMA store (cp.async.bulk.tensor from shared memory) writes as
 * initialized: a later read of it would be reported as uninitialized. So a launcher whose kernel writes its output by
 * TMA stores tells it, through NVTX's memory API, that the N ranges of `bytes` at p[0 .. N-1] are written once the
 * work queued on s has run (backward kernel 13's dK and dV, forward kernel 39's O). Without a tool attached the call
 * returns at once. */
template <int N> static inline void tma_stores_written(void *const (&p)[N], size_t bytes, cudaStream_t s)
{
#ifdef TMA_HAVE_NVTX_MEM
    static const nvtxDomainHandle_t domain = nvtxDomainCreateA("step05: outputs written by TMA stores");
    nvtxMemVirtualRangeDesc_t ranges[N];
    for (int i = 0; i < N; i++) ranges[i] = {bytes, p[i]};
    nvtxMemMarkInitializedBatch_t batch = {};
    batch.extCompatID = NVTX_EXT_COMPATID_MEM, batch.structSize = sizeof batch;
    batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS, batch.regionDescCount = N;
    batch.regionDescElementSize = sizeof ranges[0], batch.regionDescElements = ranges;
    nvtxMemCudaMarkInitialized(domain, s, 0, &batch);
#else
    (void)p, (void)bytes, (void)s;
#endif
}

#endif
