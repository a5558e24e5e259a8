"""The generated parts of the root README.md (names root-...): its first screens and one real output per step of the
chapter, read from the recorded runs in plots/gallery/ (python3 plots/lesson.py --check / --write).

  step05_t4_emulated.txt  ./step05 --gpu-as t4 on the compute_75 build (a T4's code path and limits, on the H200)
  step05_h200.txt         ./step05 on the H200's own build
  check_cpu.txt           make NOCUDA=1 check, a machine with no GPU and no nvcc (a laptop's first make check)
  and the steps' own recorded runs, which their READMEs quote at length."""
from lesson import excerpt, part


@part("root-t4")
def t4():
    return excerpt("step05_t4_emulated.txt", [r"^device: EMULATED", r"^  kernel [2-9] .*x naive$", r"^   skipped:"])


@part("root-h200")
def h200():
    return excerpt("step05_h200.txt", [r"^device:", r"^  kernel \d\d .*x naive$", r"^answer \(fp16\)"])


@part("root-cpu")
def cpu():
    return excerpt("check_cpu.txt", [r"^SKIP step05:", r"^check: "])


@part("root-step02")
def step02():
    return excerpt("step02_cpu_8G.txt", [r"^answer: "])


@part("root-step03")
def step03():
    return excerpt("step03_cpu.txt", [r"^version B", r"^two-pass"])


@part("root-step04")
def step04():
    return excerpt("step04_cpu.txt", [r"^answer: not bit for bit"])


@part("root-step07")
def step07():
    return excerpt("step02_time_cpu.txt", [r"^answer: "])


@part("root-step06")
def step06():
    return excerpt("step06_cpu.txt", [r"^answer: with tile-relative indices"])


@part("root-break")
def breaks():
    return excerpt("step07_cpu.txt", [r"^answer: Break 1 overflows", r"^answer: Break 2"])
