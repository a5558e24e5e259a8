// The plan at FlashAttention's shapes on 132 SMs: bwd_split_plan and BwdSplit copied (sed) from bwd20_split_tail.cu,
// compiled with g++ -std=c++17 (split_plan.txt is its output).
#define __host__
#define __device__
struct BwdSplit {
    long split_from;                              // the first walk that is split (items: none)
    int parts;                                    // its parts (1: none)
};
enum {
    BWD_SPLIT_PARTS = 8,                          // at most, a walk
    BWD_SPLIT_FIXED = 2,                          // what a part pays once, in row tiles (the header says what)
    BWD_SPLIT_WALKS = 256,                        // at most, split walks: the last round of up to 257 SMs
};
__host__ __device__ inline BwdSplit bwd_split_plan(long items, long grid, long rows, int causal)
{
    BwdSplit p = {items, 1};
    const long r = items % grid;                  // the last round's walks
    if (causal || items <= grid || r == 0 || r > BWD_SPLIT_WALKS) return p;
    long best = rows;                             // the last round whole: a walk's time, in row tiles
    for (int s = 2; s <= BWD_SPLIT_PARTS && s <= rows; s++) {
        const long rounds = (r * s + grid - 1) / grid, cost = rounds * ((rows + s - 1) / s + BWD_SPLIT_FIXED);
        if (cost < best) best = cost, p.parts = s;
    }
    if (p.parts > 1) p.split_from = items - r;
    return p;
}
#include <cstdio>
int main()
{
    printf("# bwd_split_plan (bwd20_split_tail.cu), compiled on the host: FlashAttention's shapes on 132 SMs, not causal\n");
    printf("D,N,B,H,walks,row_tiles_a_walk,last_round,parts,split_from,tickets\n");
    for (long D = 64; D <= 128; D += 64)
        for (long N = 512; N <= 16384; N *= 2) {
            const long B = 16384 / N, H = 2048 / D, BR = D == 64 ? 128 : 64, items = B * H * ((N + 127) / 128);
            const long grid = items > 132 ? 132 : items, rows = (N + BR - 1) / BR;
            const BwdSplit p = bwd_split_plan(items, grid, rows, 0);
            printf("%ld,%ld,%ld,%ld,%ld,%ld,%ld,%d,%ld,%ld\n", D, N, B, H, items, rows, items % grid, p.parts, p.split_from,
                   p.split_from + (items - p.split_from) * p.parts);
        }
    for (long D = 64; D <= 128; D += 64) {   // the check's case and the sanitizer's
        const long BR = D == 64 ? 128 : 64;
        const long shapes[2][3] = {{3, 10, 600}, {4, 24, 257}};
        for (int x = 0; x < 2; x++) {
            const long B = shapes[x][0], H = shapes[x][1], N = shapes[x][2], items = B * H * ((N + 127) / 128);
            const long grid = items > 132 ? 132 : items, rows = (N + BR - 1) / BR;
            const BwdSplit p = bwd_split_plan(items, grid, rows, 0);
            printf("%ld,%ld,%ld,%ld,%ld,%ld,%ld,%d,%ld,%ld\n", D, N, B, H, items, rows, items % grid, p.parts, p.split_from,
                   p.split_from + (items - p.split_from) * p.parts);
        }
    }
}
