#!/bin/sh
# The plan at FlashAttention's shapes on 132 SMs, by the kernel's own bwd_split_plan: its lines cut from
# bwd20_split_tail.cu (no copy kept), compiled with g++ on any machine with split_plan_main.cpp, run; the output is
# split_plan.txt. Usage, from the repository root: sh 05_cuda_fused/backward/runs/k20_split_tail/split_plan.sh
set -e
dir=05_cuda_fused/backward/runs/k20_split_tail
src=05_cuda_fused/backward/bwd20_split_tail.cu
{
    echo '#define __host__'
    echo '#define __device__'
    sed -n '/^struct BwdSplit {/,/^};/p' $src
    sed -n '/^enum {/,/^};/p' $src
    sed -n '/^__host__ __device__ inline BwdSplit bwd_split_plan/,/^}/p' $src
    cat $dir/split_plan_main.cpp
} > /tmp/split_plan.$$.cpp
g++ -std=c++17 -O1 -o /tmp/split_plan.$$ /tmp/split_plan.$$.cpp
/tmp/split_plan.$$
rm -f /tmp/split_plan.$$ /tmp/split_plan.$$.cpp
