"""The generated parts of 01_naive/README.md (names s01-...): every figure it quotes, read from the recorded runs in
plots/gallery/ (python3 plots/lesson.py --check / --write).

  step01_cpu.txt         ./step01                                        naive attention on the CPU, fp32, N = 1024
  step01_h200.txt        ./step01 --device gpu --seq 4096                the cuBLAS baseline, fp32
  step01_h200_fp16.txt   ./step01 --device gpu --seq 4096 --dtype fp16   the same in fp16
Every part reads whatever its file holds: a rerun rewrites the figures, never the prose's shape."""

from lesson import excerpt, gpu_name, grab, part

CPU, GPU32, GPU16 = "step01_cpu.txt", "step01_h200.txt", "step01_h200_fp16.txt"


# --- the CPU run: the textbook formula, S and P written whole -----------------------------------------------------

@part("s01-cpu")
def cpu_run():
    # the time line is left out: wall-clock is step 02's benchmark, one figure in one place
    return excerpt(CPU, [r"^step01:", r"^S and P:", r"^peak tracked", r"^error vs float64"])


@part("s01-sp")
def sp_bytes():
    return grab(CPU, r"^S and P: .* = ([\d.]+ [KMG]B)")


@part("s01-sp-one")
def sp_one():
    return grab(CPU, r"^S and P: 2 x ([\d.]+ [KMG]B)")


@part("s01-peak")
def peak():
    return grab(CPU, r"^peak tracked memory: ([\d.]+ [KMG]B)")


@part("s01-qkvo")
def qkvo():
    return grab(CPU, r"Q, K, V, O: 4 x ([\d.]+ [KMG]B)")


@part("s01-cpu-maxabs")
def cpu_maxabs():
    return grab(CPU, r"^error vs float64.*max abs ([\d.e+-]+)")


@part("s01-cpu-maxrel")
def cpu_maxrel():
    return grab(CPU, r"^error vs float64.*max rel ([\d.e+-]+)")


@part("s01-cpu-l2")
def cpu_l2():
    return grab(CPU, r"^error vs float64.*rel L2 ([\d.e+-]+)")


# --- the GPU runs: cuBLAS, a softmax kernel, cuBLAS ----------------------------------------------------------------

@part("s01-gpu")
def gpu_runs():
    pick = [r"^step01:", r"^S and P:", r"^time:", r"^error vs float64"]
    return excerpt(GPU32, pick) + "\n\n" + excerpt(GPU16, pick)


@part("s01-gpu-name")
def gpu32_name():
    return gpu_name(GPU32)


@part("s01-fp16-sp-one")
def fp16_sp_one():
    return grab(GPU16, r"^S and P: 2 x ([\d.]+ [KMG]B)")


@part("s01-fp32-sp-one")
def fp32_sp_one():
    return grab(GPU32, r"^S and P: 2 x ([\d.]+ [KMG]B)")


@part("s01-fp16-maxabs")
def fp16_maxabs():
    return grab(GPU16, r"^error vs float64.*max abs ([\d.e+-]+)")


@part("s01-fp16-maxrel")
def fp16_maxrel():
    return grab(GPU16, r"^error vs float64.*max rel ([\d.e+-]+)")


@part("s01-fp32-tflops")
def fp32_tflops():
    return grab(GPU32, r"^time: .*?([\d.]+ TFLOP/s)")


@part("s01-fp16-tflops")
def fp16_tflops():
    return grab(GPU16, r"^time: .*?([\d.]+ TFLOP/s)")
