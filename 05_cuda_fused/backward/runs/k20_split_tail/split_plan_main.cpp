// The driver of split_plan.sh: prints bwd_split_plan (cut from bwd20_split_tail.cu) at FlashAttention's shapes on 132 SMs.
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
