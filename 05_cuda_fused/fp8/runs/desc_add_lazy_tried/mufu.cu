// MUFU exp2 throughput: f32 vs f16x2 (inline PTX), one SM-full grid, chains of independent exps.
#include <cstdio>
#include <cuda_fp16.h>
__global__ void k32(float *out, float seed, int iters) {
  float x[8];
  for (int i = 0; i < 8; i++) x[i] = seed * (threadIdx.x + i) * 1e-6f;
  for (int it = 0; it < iters; it++)
#pragma unroll
    for (int i = 0; i < 8; i++) asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x[i]));
  float s = 0; for (int i = 0; i < 8; i++) s += x[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
__global__ void k16(float *out, float seed, int iters) {
  unsigned x[8];
  for (int i = 0; i < 8; i++) { __half2 h = __floats2half2_rn(seed * (threadIdx.x + i) * 1e-6f, -seed * i * 1e-6f); x[i] = *(unsigned *)&h; }
  for (int it = 0; it < iters; it++)
#pragma unroll
    for (int i = 0; i < 8; i++) asm volatile("ex2.approx.f16x2 %0, %0;" : "+r"(x[i]));
  float s = 0; for (int i = 0; i < 8; i++) { __half2 h = *(__half2 *)&x[i]; s += __low2float(h) + __high2float(h); }
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
// the conversion chain: f32 pair -> f16x2 -> ex2 -> e4m3x2
__global__ void kchain(unsigned short *out, const float *in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (2 * i + 1 >= n) return;
  unsigned h, e; float a = in[2 * i], b = in[2 * i + 1];
  asm("cvt.rn.f16x2.f32 %0, %2, %1;" : "=r"(h) : "f"(a), "f"(b));
  asm("ex2.approx.f16x2 %0, %0;" : "+r"(h));
  asm("{.reg .b16 t; cvt.rn.satfinite.e4m3x2.f16x2 t, %1; cvt.u32.u16 %0, t;}" : "=r"(e) : "r"(h));
  out[i] = (unsigned short)e;
}
int main() {
  float *d; cudaMalloc(&d, 132 * 4 * 1024 * 4 * 8);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  const int iters = 4096, blocks = 132 * 4, threads = 512;
  for (int rep = 0; rep < 3; rep++) {
    float t32, t16;
    k32<<<blocks, threads>>>(d, 1.f, iters); cudaEventRecord(a); k32<<<blocks, threads>>>(d, 1.f, iters); cudaEventRecord(b); cudaEventSynchronize(b); cudaEventElapsedTime(&t32, a, b);
    k16<<<blocks, threads>>>(d, 1.f, iters); cudaEventRecord(a); k16<<<blocks, threads>>>(d, 1.f, iters); cudaEventRecord(b); cudaEventSynchronize(b); cudaEventElapsedTime(&t16, a, b);
    double n = (double)blocks * threads * iters * 8;
    printf("f32 ex2: %.3f ms, %.1f G instr/s (%.1f G exps/s); f16x2 ex2: %.3f ms, %.1f G instr/s (%.1f G exps/s)\n",
           t32, n / t32 / 1e6, n / t32 / 1e6, t16, n / t16 / 1e6, 2 * n / t16 / 1e6);
  }
  printf("%s\n", cudaGetErrorString(cudaDeviceSynchronize()));
  return 0;
}
