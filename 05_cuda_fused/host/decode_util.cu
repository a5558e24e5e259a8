/*
 * decode_util.cu: two device helpers of step 05's --decode benchmark (decode.c): the device's read
 * bandwidth, measured, which is the ceiling of every decode kernel (a decode reads the cache once and does
 * about one flop per byte with it); and a random fill for caches of gigabytes, made on the device.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "decode.h"
#include "gpu.cuh"

/* Every thread reads 16 bytes at a time, grid-stride, and adds them up; one thread of each block writes
 * its sum only if it is exactly 0x12345678 (never, but the compiler cannot know: no load is dropped). */
__global__ void read_probe(const uint4 *__restrict__ x, size_t n16, unsigned *sink)
{
    unsigned acc = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += (size_t)gridDim.x * blockDim.x) {
        const uint4 v = x[i];
        acc += v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x12345678u) *sink = acc;
}

typedef struct { const uint4 *x; size_t n16; unsigned *sink; int grid; } Probe;
static void probe_fn(void *c)
{
    const Probe *p = (const Probe *)c;
    read_probe<<<p->grid, 512>>>(p->x, p->n16, p->sink);
    CUDA_CHECK_LAST();
}

extern "C" double dec_read_bandwidth_gbs(size_t bytes, int repeat)
{
    void *x = dmalloc_try(bytes);
    unsigned *sink = x ? (unsigned *)dmalloc_try(sizeof(unsigned)) : nullptr;
    if (!sink) { dfree(x); return -1; }
    dec_fill_random(x, bytes / 2, DT_FP16, 12345);         // not zeros: the same data a cache holds
    int dev = 0, sms = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    Probe p = {(const uint4 *)x, bytes / 16, sink, sms * 4};  // 4 blocks of 512 threads per SM: every thread slot
    const double ms = gpu_time_median_ms(probe_fn, &p, 2, repeat);
    dfree(sink);
    dfree(x);
    return (double)(bytes / 16 * 16) / ms / 1e6;
}

__device__ __forceinline__ uint32_t mix32(uint64_t z)      // splitmix64's finaliser, upper half
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

template <typename T> __device__ __forceinline__ T fill_cast(float x);
template <> __device__ __forceinline__ float fill_cast<float>(float x) { return x; }
template <> __device__ __forceinline__ __half fill_cast<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 fill_cast<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

template <typename T> __global__ void fill_random(T *d, size_t n, uint64_t seed)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint64_t z = seed * 0x9e3779b97f4a7c15ull + i * 4;
        float u = 0;
        for (int k = 0; k < 4; k++) u += mix32(z + k) * (1.0f / 4294967296.0f); // sum of 4 uniforms: mean 2, var 1/3
        d[i] = fill_cast<T>((u - 2.0f) * 1.7320508f);                       // centred, variance 1
    }
}

extern "C" void dec_fill_random(void *d, size_t n, int dtype, uint64_t seed)
{
    if (dtype == DT_FP32) fill_random<<<1024, 256>>>((float *)d, n, seed);
    else if (dtype == DT_FP16) fill_random<<<1024, 256>>>((__half *)d, n, seed);
    else fill_random<<<1024, 256>>>((__nv_bfloat16 *)d, n, seed);
    CUDA_CHECK_LAST();
}
