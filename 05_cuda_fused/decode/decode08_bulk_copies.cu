/*
 * Decode kernel 8: bulk copies, by the copy engine.
 *
 * Extends decode kernel 7 (decode07_lean_copies.cu). The idea: Hopper's copy engine (TMA) takes a whole 16-key
 * quarter of K (or V) in one request. The cache, paged or not, is a tensor of rows of D elements, a quarter is 16
 * consecutive rows of it (one page holds it), and one box of 16 rows x D columns (4 KB at D = 128) lands in shared
 * memory with the 128-byte swizzle that keeps ldmatrix free of bank conflicts without the pad row of kernels 2-7
 * (DecSmemBulk). Lanes 0-7 of warp 0 issue a tile's 8 boxes, lane 0 tells the stage's mbarrier the bytes to expect,
 * and every warp waits on the mbarrier's phase: warps 1-3 spend no issue slot on the stream. The math after the copy
 * is kernel 7's, the same keys in the same order: O is the same to the bit.
 * Why: kernel 7 still has every thread of the block start 16 cp.async of 16 bytes per tile at D = 128, then wait on
 * its own copies (cp.async.wait_group) and meet at a __syncthreads before the tile may be read. What the copy engine
 * needs is large requests: the same rows as one 256-byte bulk copy each read the cache at half the rate of these
 * boxes; 2 KB and 4 KB requests reach the device's read bandwidth (the steps measured: RESULTS.md#decode-8).
 * What it costs: sm_90 and later (cp.async.bulk.tensor, mbarrier byte counts; elsewhere a SKIP line); a tensor map of
 * K and V made on the host (a driver call, the last four kept); keys past len arrive with whatever the cache holds
 * there and are zeroed by the block before the math (a NaN in an unwritten slot would otherwise turn p = 0 times V
 * into NaN). Little or nothing where a launch is too short for the stream to matter (L = 1024).
 * Measured: H200, fp16, D = 128, pages of 64: B = 64, 32 heads, L = 2048 488.4 us against kernel 7's 525.9 (+7.7%),
 * 100% of the read bandwidth; +7.8% at B = 1, L = 131072; the runs: RESULTS.md#decode-8.
 */
#ifndef RUNG
#define RUNG 8           // this file is the one compiled: its launcher and registry entry (the end) are built
#endif
#include "decode07_lean_copies.cu"

// --- the idea -------------------------------------------------------------------------------------

/* Where element (r, c) of a 64-row tile sits (in elements from the tile's start), as the copy engine leaves a box of
 * 16 rows x 64 columns (128 bytes a row) with the 128-byte swizzle, boxes in the order (quarter r / 16, column half
 * c / 64): row r's 16-byte chunk j sits at chunk j ^ (r % 8), so ldmatrix's 8 rows of one chunk fall in 8 different
 * bank groups (kernel 10's layout). */
template <int D> __device__ __forceinline__ int dec_sw_at(int r, int c)
{
    return ((((r / 16) * (D / 64) + c / 64) * 16 + r % 16) * 64) + ((((c % 64) / 8) ^ (r % 8)) * 8) + c % 8;
}

/* The stages unpadded and swizzled as the copy engine writes them, from the first 1024-byte boundary (the swizzle's
 * atom; 1 KB more to align in), then the stages' mbarriers. ld_at: dec_sw_at for ldmatrix's rows, the lane's part
 * apart from the compiled part: the swizzle is then one XOR with a per-lane constant, not a division and a modulo per
 * ldmatrix. */
template <int D, int NST> struct DecSmemBulk {
    static constexpr int LD = D;
    static constexpr size_t stages = (size_t)NST * 2 * DEC_BC * LD * 2; // K and V, NST stages, 16-bit
    static constexpr size_t bytes = stages + 1024 + 8 * NST;
    static constexpr int ALIGN = 1024;
    static __device__ __forceinline__ int ld_at(int kr, int rl, int c, int cl)
    {
        return (((kr >> 4) * (D / 64) + c / 64) * 16 + rl) * 64 + ((((c % 64) / 8) ^ ((cl / 8) ^ (rl % 8))) * 8);
    }
};

/* The tile by the copy engine. The cache viewed as a tensor [rows][D / 64 column halves][64] (dec_tensor_maps) gives
 * a quarter as one box of 16 rows x 64 columns x the halves, 4 KB at D = 128, landing as the halves one after the
 * other, each [16][64] with the 128-byte swizzle (dec_sw_at's layout). 4 boxes of K and 4 of V per tile, where kernel
 * 7 issues 2048 cp.async of 16 bytes. Lanes 0-7 of warp 0 each issue one box (lane / 2 the quarter, lane % 2 K or V),
 * lane 0 tells the stage's mbarrier the bytes; the cache is read once, so each box is marked to leave L2 first.
 * Quarters wholly past len are not read; rows past len inside a read quarter arrive with whatever the cache holds
 * there (a slot never written may hold a NaN, and p = 0 times a NaN of V is NaN), so the block zeroes every row from
 * len on once the tile has landed (dec_zero_past_len). sm_90 and later; elsewhere the kernel is not launched. */
template <int D, typename T>
__device__ __forceinline__ void dec_bulk_tile(T *ks, T *vs, const DecParams<T> &p, long hkv, long key0, int len,
                                              const int (&ent)[4], uint32_t bar)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const int lane = threadIdx.x % 32;
    const int quarters = (int)min(4L, (len - key0 + 15) / 16); // quarters holding a key before len (key0 < len)
    if (lane == 0) mbar_expect_tx(bar, quarters * 16 * D * 2 * 2); // their K and V boxes
    const int q = lane / 2, isv = lane % 2;
    if (q < quarters) {
        const long kq = key0 + 16 * q;
        const int page = q == 0 ? ent[0] : q == 1 ? ent[1] : q == 2 ? ent[2] : ent[3];
        const long row = (((long)page * p.Hkv + hkv) << p.page_shift) | (kq & ((1L << p.page_shift) - 1)); // kernel 5's row
        uint64_t policy;                                   // L2: evict these lines first (each byte is read once)
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
        asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
                     " [%0], [%1, {%2, %3, %4}], [%5], %6;\n"
                     ::"r"((uint32_t)__cvta_generic_to_shared((isv ? vs : ks) + dec_sw_at<D>(16 * q, 0))),
                       "l"(reinterpret_cast<uint64_t>(isv ? &p.tmv : &p.tmk)), "r"(0), "r"((int)row), "r"(0), "r"(bar),
                       "l"(policy) : "memory");
    }
#else
    (void)ks, (void)vs, (void)p, (void)hkv, (void)key0, (void)len, (void)ent, (void)bar;
    __trap();                                              // never launched below sm_90 (decode kernel 8's unavailable)
#endif
}

/* After the tile that holds the sequence's end has landed, its rows from len on zeroed by the block (then a
 * __syncthreads): V's so that p = 0 times them is 0, K's so that no score reads an unwritten value. */
template <int D, typename T>
__device__ __forceinline__ void dec_zero_past_len(T *ks, T *vs, long key0, int len)
{
    const int from = (int)(len - key0);                    // 1 .. 63
    for (int x = threadIdx.x; x < (DEC_BC - from) * (D / 8); x += DEC_WARPS * 32) {
        const int r = from + x / (D / 8), c = (x % (D / 8)) * 8;
        *reinterpret_cast<uint4 *>(ks + dec_sw_at<D>(r, c)) = make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4 *>(vs + dec_sw_at<D>(r, c)) = make_uint4(0, 0, 0, 0);
    }
}

/* The stages' mbarriers (count 1: lane 0 of warp 0's arrive with the bytes), and the wait for one. */
__device__ __forceinline__ void dec_bars_init(uint32_t bar0, int n)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (threadIdx.x == 0) {
        for (int i = 0; i < n; i++) mbar_init(bar0 + 8 * i, 1);
        fence_mbar_init();                                 // seen by the copy engine
    }
    __syncthreads();
#else
    (void)bar0, (void)n;
    __trap();
#endif
}
__device__ __forceinline__ void dec_bar_wait(uint32_t bar, int parity)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    mbar_wait(bar, parity);
#else
    (void)bar, (void)parity;
    __trap();
#endif
}

/* The tensor map of K or V: the cache's rows (D elements each) as [rows][D / 64][64], so that one box {64, 16 rows,
 * D / 64} is a 16-key quarter, every column, in one request, each 128-byte half-row swizzled (128B). No L2 promotion:
 * measured on the H200, promoting each 128-byte piece to 256 bytes cost 6-7% at B = 64 and L = 131072 (the box reads
 * all of every row anyway). 0, or -1 after one line. */
static inline int dec_encode_map(CUtensorMap *map, const void *base, long rows, long D, int dtype, const char *who)
{
    const cuuint64_t dims[3] = {64, (cuuint64_t)rows, (cuuint64_t)(D / 64)};
    const cuuint64_t strides[2] = {(cuuint64_t)D * 2, 128};                /* bytes: the next row, the next half */
    const cuuint32_t box[3] = {64, 16, (cuuint32_t)(D / 64)};
    return tma_encode_3d(map, dtype == DT_FP16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, base, dims,
                         strides, box, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE, who);
}

/* The maps of K and V, the last four pairs kept: a benchmark turns over a few copies of one cache, and encoding is a
 * driver call. 0, or -1 after one line. */
static inline int dec_tensor_maps(int id, const void *k, const void *v, long rows, long D, int dtype, CUtensorMap *tk,
                                  CUtensorMap *tv)
{
    struct Kept { CUtensorMap k, v; const void *ck, *cv; long rows, D; int dtype; };
    static Kept kept[4];
    static int next = 0;
    for (int i = 0; i < 4; i++) {
        const Kept &e = kept[i];
        if (e.ck == k && e.cv == v && e.rows == rows && e.D == D && e.dtype == dtype) { *tk = e.k; *tv = e.v; return 0; }
    }
    char who[32];
    snprintf(who, sizeof who, "decode kernel %d", id);
    Kept &e = kept[next];
    e.ck = e.cv = nullptr;
    if (dec_encode_map(&e.k, k, rows, D, dtype, who) || dec_encode_map(&e.v, v, rows, D, dtype, who)) return -1;
    e.ck = k; e.cv = v; e.rows = rows; e.D = D; e.dtype = dtype;
    next = (next + 1) % 4;
    *tk = e.k;
    *tv = e.v;
    return 0;
}

/* NULL where kernels 8 to 13 run: sm_90 or later, in this build; else one line why not (defined with kernel 8's
 * entry, below). */
const char *dec_bulk_unavailable(void);

struct Dec8Bulk : Dec7Lean {
    template <int D, int NST> using Smem = DecSmemBulk<D, NST>;

    /* Warp 0 alone copies, so alone needs the pages; the mbarriers made before the first copies; a tile's copy is
     * warp 0's boxes, and the wait for it the stage's mbarrier, then the rows past len zeroed in the sequence's last
     * tile. */
    static __device__ __forceinline__ bool copier(int warp) { return warp == 0; }
    template <class P, class FirstCopies>
    static __device__ __forceinline__ void before_loop(uint32_t bar0, FirstCopies &first_copies)
    {
        dec_bars_init(bar0, P::NST);
        first_copies();
    }
    template <class P, int D, typename T>
    static __device__ __forceinline__ void copy_tile(T *ks, T *vs, const DecParams<T> &p, long b, long hkv, long key0,
                                                     int len, const int (&ent)[4], uint32_t bar)
    {
        (void)b;
        if (threadIdx.x < 32) dec_bulk_tile<D>(ks, vs, p, hkv, key0, len, ent, bar);
    }
    template <class P, int D, typename T>
    static __device__ __forceinline__ void wait_tile(T *k_s, T *v_s, uint32_t bar0, int it, int t0, int len)
    {
        dec_bar_wait(bar0 + 8 * (it % P::NST), (it / P::NST) & 1); // tile it's boxes are in, for every thread that waits
        if ((long)(t0 + it + 1) * DEC_BC > len) {            // the sequence's last tile, keys past len in it
            dec_zero_past_len<D>(k_s, v_s, (long)(t0 + it) * DEC_BC, len);
            __syncthreads();
        }
    }

    /* The launch: the pools as one tensor of rows for the copy engine. */
    template <int D, typename T>
    static int params(int id, const DecodeArgs *a, void *ws, const DecGrid &gr, DecParams<T> *p)
    {
        if (Dec7Lean::params<D>(id, a, ws, gr, p)) return -1;
        const long rows = a->pool_pages * a->Hkv * a->page;
        if (rows > INT_MAX) {
            fprintf(stderr, "%s: decode kernel %d reads at most 2^31 - 1 cache rows by tensor map, not %ld\n", g_prog, id, rows);
            return -1;
        }
        return dec_tensor_maps(id, p->k, p->v, rows, D, a->dtype, &p->tmk, &p->tmv);
    }
};

// --- the launcher ---------------------------------------------------------------------------------

#if RUNG == 8
static int dk8_launch(const DecodeArgs *a, void *ws, void *s) { return dec_launch<Dec8Bulk>(8, a, ws, s); }
static size_t dk8_workspace(const DecodeArgs *a) { return dec_workspace<Dec8Bulk>(a); }
static void dk8_describe(const DecodeArgs *a, char *buf, size_t n) { dec_describe<Dec8Bulk>(a, buf, n); }

/* Whether this binary holds sm_90-or-later code for this GPU: a one-thread probe compiled as the kernel is. */
__global__ void dec_bulk_probe(int *ok)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    *ok = 1;
#else
    *ok = 0;
#endif
}

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
    .idea = "K/V tiles by the copy engine, one 4 KB box per 16-key quarter, counted on an mbarrier",
    .dtypes = (1u << DT_FP16) | (1u << DT_BF16), .supports_dim = dec_supports, .paged = 1,
    .workspace = dk8_workspace, .launch = dk8_launch, .describe = dk8_describe, .unavailable = dec_bulk_unavailable,
};
DECODE_REGISTER(decode8);
#endif
