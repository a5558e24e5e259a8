"""The generated parts of 02_memprobe/README.md (names s02-...): every figure it quotes, read from the recorded runs
in plots/gallery/ (python3 plots/lesson.py --check / --write).

  step02_cpu_8G.txt (+ .csv)     ./step02 --mem-limit 8G --csv ...          the memory probe on the CPU (Steps 1, 5)
  step02_h200_fp16_8G.txt        ./step02 --device gpu --mem-limit 8G       the same on the GPU, fp16
  step02_time_cpu.txt (+ .csv)   ./step02 --time --csv ...                  Step 7 on the CPU: the crossover
  step02_time_cpu_b16.txt        ./step02 --time --seq-list 1024 --br 16 --bc 16     what moves it: the tile
  step02_time_cpu_b256.txt       ./step02 --time --seq-list 1024 --br 256 --bc 256   (the same machine, one call)
Every part reads whatever its file holds: a rerun rewrites the figures, never the prose's shape."""
import re

from lesson import DataError, excerpt, gpu_name, grab, meta_and_lines, one, part, rows, source, table

PROBE, PROBE_CSV, GPU = "step02_cpu_8G.txt", "step02_cpu_8G.csv", "step02_h200_fp16_8G.txt"
TIME, TIME_CSV = "step02_time_cpu.txt", "step02_time_cpu.csv"
B16, B256 = "step02_time_cpu_b16.txt", "step02_time_cpu_b256.txt"


def mb(x):
    """Bytes as the programs print them (powers of 1000)."""
    x = float(x)
    for unit, d in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if x >= d:
            return f"{x / d:.2f} {unit}" if unit == "GB" else f"{x / d:.1f} {unit}"
    return f"{x:.0f} B"


# --- Steps 1 and 5: the memory probe -----------------------------------------------------------------------------------

@part("s02-mem-table")
def mem_table():
    """Peak tracked memory per N from the probe's CSV (its time column is one run each, not a benchmark: left out)."""
    by_n = {}
    for r in rows(PROBE_CSV):
        by_n.setdefault(int(r["N"]), {})[r["method"]] = r
    body = []
    for n in sorted(by_n):
        nv, tv = by_n[n].get("naive"), by_n[n].get("tiled")
        if not nv or not tv:
            raise DataError(f"plots/gallery/{PROBE_CSV}: N = {n} lacks a naive or a tiled row")
        naive = mb(nv["peak_bytes"]) if nv["status"] == "ok" else f"OOM (needs {mb(nv['need_bytes'])})"
        nb = float(nv["peak_bytes"] if nv["status"] == "ok" else nv["need_bytes"])
        body.append([n, naive, mb(tv["peak_bytes"]), f"{nb / float(tv['peak_bytes']):.1f}x"])
    limit = mb(rows(PROBE_CSV)[0]["limit_bytes"])
    src = source(PROBE_CSV)[:-1] + f", [{PROBE}](%GALLERY%/{PROBE}))"  # the CSV and the output of the one run
    return (table(["N", "naive peak", "tiled peak", "naive / tiled"], body)
            + f"\n\n<sub>limit {limit}; {src}</sub>")


@part("s02-answers")
def answers():
    """The probe's two answer lines (the table above names the run)."""
    return excerpt(PROBE, [r"^answer:"], caption=False)


@part("s02-growth")
def growth():
    return grab(PROBE, r"naive peak grew ([\d.]+x), tiled [\d.]+x", 1)


@part("s02-gpu")
def gpu():
    """The GPU probe's answer lines (the caption names the GPU)."""
    return excerpt(GPU, [r"^answer:"])


@part("s02-gpu-fail-n")
def gpu_fail_n():
    return grab(GPU, r"^answer: naive attention first fails at N = (\d+)")


@part("s02-gpu-last")
def gpu_last():
    """The largest N of the GPU sweep and the fused kernel's peak there."""
    _, lines = meta_and_lines(GPU)
    last = [l for l in lines if re.match(r"^\s+\d+\s+fused\s+ok", l)]
    if not last:
        raise DataError(f"plots/gallery/{GPU}: no fused rows")
    f = last[-1].split()
    return f"N = {f[0]}, {f[3]} {f[4]}"


# --- Step 7 on the CPU: the wall-clock benchmark --------------------------------------------------------------------------

@part("s02-time")
def time_run():
    """The table's head, one row per N and the answer (the program's note on the ratio is said in the prose)."""
    return excerpt(TIME, [r"^\s+N\s+naive ms", r"^\s+\d+\s+[\d.]+\s+\(", r"^answer:"])


@part("s02-time-machine")
def time_machine():
    """The benchmark's CPU; record.sh writes ', no GPU' when it finds no nvidia-smi, which says that the run used none."""
    return gpu_name(TIME).replace(", no GPU", "")


def ratio_at(name, n):
    return grab(name, rf"^\s+{n}\s+[\d.]+\s+\([^)]*\)\s+[\d.]+\s+\([^)]*\)\s+([\d.]+)x")


@part("s02-b16")
def b16():
    return ratio_at(B16, 1024) + "x"


@part("s02-b64")
def b64():
    return f"{float(one(TIME_CSV, 'speedup', N=1024, method='tiled')):.3f}x"


@part("s02-b256")
def b256():
    return ratio_at(B256, 1024) + "x"


@part("s02-b-source")
def b_source():
    """Links to the two tile runs (their machine and date are the benchmark's: one call, one machine)."""
    for f in (B16, B256):
        source(f)  # raises when a file lacks its identity lines
    return ", ".join(f"[{f}](%GALLERY%/{f})" for f in (B16, B256))


@part("s02-probe-machine")
def probe_machine():
    return gpu_name(PROBE)


@part("s02-probe-times")
def probe_times():
    """The probe's own time column at N = 4096 (one run each, on its machine): naive / tiled."""
    nv = float(one(PROBE_CSV, "ms", N=4096, method="naive"))
    tv = float(one(PROBE_CSV, "ms", N=4096, method="tiled"))
    return f"{nv / 1e3:.1f} s and {tv / 1e3:.1f} s"
