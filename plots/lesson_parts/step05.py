"""The generated parts of 05_cuda_fused/README.md (names s05-...): every table and number it quotes from a run, read
from the recorded runs in plots/gallery/ (python3 plots/lesson.py --check / --write); the kernels' names and ideas
come from their registry entries in 05_cuda_fused/*/ (the `.idea = "..."` line), so the table says what the code says.

  step05_h200.txt            ./step05 on the H200's own build (the first screen)
  bench_h200_fp16.csv        ./step05 --bench --dtype fp16: every fp16 kernel at FlashAttention's shapes
  sdpa_h200_fp16.csv         plots/sdpa_reference.py: FlashAttention-2 and cuDNN at the same shapes, the same call
  bench_backward_b2_20_h200_fp16.csv  every backward kernel at N = 512..4096 (--seq 4096): the kernel-by-kernel table
  bench_short_h200_fp16[_causal].csv, sdpa_short_h200_fp16[_causal].csv:
                             N = 512..2048 (--bench --seq 2048), kernels and SDPA in one call, causal and not
  bench_backward_b15_20_h200_fp16[_causal].csv, sdpa_backward_b15_20_h200_fp16[_causal].csv: backward kernels 15-20
                             and SDPA at every N, causal and not, one call (the short table's backward columns too)
  05_cuda_fused/forward/runs/[k39_o_tma/]h200_ncu_*: Nsight Compute beside cuDNN (the instructions each executed)
  05_cuda_fused/runs/aims_one_call*/, backward/runs/k20_split_tail/: every run of the last backward kernel beside
                             cuDNN (cuDNN's largest lead); backward/runs/k19_diagonal_start/profile_n8192/: kernel 19's
                             profile beside cuDNN's at N = 8192
  bench_backward_h200_fp16.csv, sdpa_backward_h200_fp16.csv      the gallery's backward run beside cuDNN
  05_cuda_fused/fp8/runs/k48_o_by_tma/profile/: FP8 kernel 48 under Nsight Compute at N = 4096, D = 128
  decode_h200_fp16.csv, sdpa_decode_h200_fp16.csv                decode against a KV cache
  fp8_bench_h200.csv, fp8_errors_cpu.csv                         FP8's speed (H200) and its error (CPU)
  timer_h200.txt             sh common/timer_check.sh: what a planted host delay moves, the GPU busy and idle
"""
import csv
import glob
import os
import re

from lesson import ROOT, DataError, command, excerpt, fmt, gpu_name, meta, meta_and_lines, part, rows, source, table

F05 = os.path.join(ROOT, "05_cuda_fused")


def f05(path):
    """A file of 05_cuda_fused/ (a run kept in the record, backward/runs/...) as the gallery-relative name the readers
    of plots/lesson.py take."""
    return os.path.relpath(os.path.join(F05, path), os.path.join(ROOT, "plots", "gallery"))


# Each kernel family's files in 05_cuda_fused/, by number: forward and FP8 share the numbers.
FAMILY_FILES = {"kernel": ["forward/kernel%02d_*.cu", "fp8/kernel%02d_*.cu"], "bwd": ["backward/bwd%02d_*.cu"],
                "decode": ["decode/decode%02d_*.cu"]}


def family_ids(prefix):
    """The numbers of a family's kernels in the code (the files there are), ascending."""
    found = set()
    for p in FAMILY_FILES[prefix]:
        for f in glob.glob(os.path.join(F05, p.replace("%02d", "[0-9][0-9]"))):
            found.add(int(re.search(r"(\d\d)_[^/]*\.cu$", f).group(1)))
    return sorted(found)


def entry(prefix, n):
    """(name, idea) of a kernel from its registry entry: prefix kernel, bwd or decode; forward and FP8 share numbers."""
    pats = FAMILY_FILES[prefix]
    for p in pats:
        for f in glob.glob(os.path.join(F05, p % n)):
            text = open(f).read()
            name = re.search(r'^\s*\.id = \d+, \.extends = \d+, \.name = "([^"]*)"', text, re.M)
            idea = re.search(r'^\s*\.idea = "(.*)",\s*$', text, re.M)
            if name and idea:
                return name.group(1), idea.group(1)
    raise DataError(f"no registry entry for {prefix} {n} in 05_cuda_fused/")


def tf(r):
    return float(r["tflops"])


def pick(rs, **kw):
    out = [r for r in rs if all(str(r[k]) == str(v) for k, v in kw.items())]
    if len(out) != 1:
        raise DataError(f"{len(out)} rows match {kw}, expected one")
    return out[0]


# --- the first screen --------------------------------------------------------------------------------------------

@part("s05-first")
def first():
    return excerpt("step05_h200.txt", [r"^step05:", r"^device:", r"^  (naive|kernel)", r"^answer \(fp16\)"])


@part("s05-kernel1-ratio")
def kernel1_ratio():
    for line in meta_and_lines("step05_h200.txt")[1]:
        m = re.search(r"^  kernel 1 .* ([\d.]+x) naive$", line)
        if m:
            return m.group(1)
    raise DataError("step05_h200.txt: no kernel 1 line")


# --- the forward ladder ------------------------------------------------------------------------------------------

BENCH, SDPA = "bench_h200_fp16.csv", "sdpa_h200_fp16.csv"


def ladder(ids, N=4096, first=True):
    """The kernels ids at N, each against the kernel it extends; the first table also has naive's row and names the
    run, the next says it is the same run."""
    rs = rows(BENCH, mode="bench", causal=0)
    body = []
    if first:
        naive = [pick(rs, kernel=0, N=N, D=D) for D in (64, 128)]
        body.append(["naive", "cuBLAS, S and P in memory"] + [fmt(tf(r)) for r in naive] + [""])
    for k in ids:
        name, idea = entry("kernel", k)
        here = [pick(rs, kernel=k, N=N, D=D) for D in (64, 128)]
        e = int(re.search(r"\.extends = (\d+)", open(glob.glob(os.path.join(F05, "forward", "kernel%02d_*.cu" % k))[0]).read()).group(1))
        below = [r for r in rs if r["kernel"] == str(e) and r["N"] == str(N)]
        if len(below) == 2:
            rel = " / ".join(f"{100 * tf(a) / tf(b):.0f}%" for a, b in zip(here, sorted(below, key=lambda r: int(r["D"]))))
            rel += f" of {e}"
        else:
            rel = ""
        body.append([f"{k}", name] + [fmt(tf(r)) for r in here] + [rel])
    return table(["kernel", "name", "D = 64", "D = 128", "against the kernel it extends"], body,
                 ["---:", "---", "---:", "---:", "---:"]) + f"\n\n<sub>TFLOP/s at N = {N}, fp16; " + (
                     source(BENCH) if first else f"the same run ([{BENCH}](%GALLERY%/{BENCH}))") + "</sub>"


@part("s05-ladder-all")
def ladder_all():
    return ladder(range(3, 10))


@part("s05-ladder-hopper")
def ladder_hopper():
    return ladder([10, 11, 12, 13, 14, 18, 19, 20, 21, 22, 23, 26, 36, 39, 52], first=False)


@part("s05-ceiling")
def ceiling():
    r = rows(BENCH, mode="ceiling")
    if len(r) != 1:
        raise DataError(f"{BENCH}: {len(r)} ceiling rows")
    return fmt(tf(r[0]))


def best_vs(bench, sdpa, causal, Ns, ids=None, mode="bench"):
    """Per D and N: the best kernel (of ids) and its TFLOP/s, FlashAttention-2's and cuDNN's, the ratio to cuDNN."""
    rs = [r for r in rows(bench, mode=mode, causal=causal) if int(r["kernel"]) > 0 and (ids is None or int(r["kernel"]) in ids)]
    ss = rows(sdpa, mode=mode, causal=causal)
    body = []
    for D in (64, 128):
        for N in Ns:
            here = [r for r in rs if r["N"] == str(N) and r["D"] == str(D)]
            if not here:
                raise DataError(f"{bench}: no kernel at N = {N}, D = {D}")
            b = max(here, key=tf)
            fa2, cud = (pick(ss, kernel=k, N=N, D=D) for k in (-2, -3))
            body.append([f"D = {D}", f"{N}", f"{b['kernel']}", fmt(tf(b)), fmt(tf(fa2)), fmt(tf(cud)),
                         f"{100 * tf(b) / tf(cud):.1f}%"])
    return table(["", "N", "best kernel", "TFLOP/s", "FlashAttention-2", "cuDNN", "best / cuDNN"], body,
                 ["---", "---:", "---:", "---:", "---:", "---:", "---:"])


@part("s05-vs-sdpa")
def vs_sdpa():
    return (best_vs(BENCH, SDPA, 0, (4096, 16384)) +
            "\n\n<sub>fp16; " + source(BENCH, "kernels") + "; " + source(SDPA, "FlashAttention-2 and cuDNN") + "</sub>")


TIMER = "timer_h200.txt"


def timer_moves(which):
    """The moves the planted delay made in timer_h200.txt's rows, busy or idle, in percent."""
    pat = r"busy: the planted delay moved it ([-+][0-9.]+)%" if which == "busy" else r"idle: ([-+][0-9.]+)%"
    moves = [float(m.group(1)) for line in meta_and_lines(TIMER)[1] for m in [re.search(pat, line)] if m]
    if len(moves) != 4 or meta(TIMER, "exit") != "0":
        raise DataError(f"plots/gallery/{TIMER}: expected four rows and exit 0, found {len(moves)} rows, exit {meta(TIMER, 'exit')}")
    return moves


@part("s05-timer-busy")
def timer_busy():
    return fmt(max(abs(m) for m in timer_moves("busy")), 2)


@part("s05-timer-idle")
def timer_idle():
    moves = timer_moves("idle")
    return f"{min(moves):.0f} to {max(moves):.0f}"


def apart(x, edge):
    """x to one decimal, or to as many more as it takes for the text not to read as `edge` (99.95 next to 100, 0.05
    next to 0): a share just short of cuDNN's, or a lead just above none, is never printed as the edge itself."""
    nd = 1
    while x != edge and float(f"{x:.{nd}f}") == edge and nd < 6:
        nd += 1
    return f"{x:.{nd}f}"


def share(r):
    """A kernel's share of cuDNN, r in %, in bold where cuDNN is ahead."""
    return f"**{apart(r, 100)}%**" if r < 100 else f"{apart(r, 100)}%"


@part("s05-short")
def short_vs():
    """The short sequences (N = 512..2048), forward and backward, causal and not: the best kernel against cuDNN, each
    kernel run beside the SDPA run of its call (the forward's call, and the backward's of kernels 15-20)."""
    cols = [("", "bench"), ("", "bench"), ("_backward", "bench_backward"), ("_backward", "bench_backward")]
    names = []
    body = {(D, N): [f"D = {D}", f"{N}"] for D in (64, 128) for N in (512, 1024, 2048)}
    for x, (kind, mode) in enumerate(cols):
        causal = x % 2
        c = "_causal" if causal else ""
        if kind:   # the backward: the run of kernels 15-20 at every N, its N <= 2048
            bench, sdpa = f"bench{BWD_LAST}{c}.csv", f"sdpa{BWD_LAST}{c}.csv"
        else:
            bench, sdpa = (f"{w}_short_h200_fp16{c}.csv" for w in ("bench", "sdpa"))
        names += [bench, sdpa]
        for (D, N), row in body.items():
            rs = [r for r in rows(bench, mode=mode, causal=causal, N=N, D=D) if int(r["kernel"]) > 0]
            if not rs:
                raise DataError(f"{bench}: no kernel at N = {N}, D = {D}")
            b = max(rs, key=tf)
            cud = tf(pick(rows(sdpa, mode=mode, causal=causal), kernel=-3, N=N, D=D))
            r = 100 * tf(b) / cud
            row.append(f"{share(r)} ({tf(b):.0f} / {cud:.0f})")
    machines = {gpu_name(n) for n in names}
    if len(machines) != 1:
        raise DataError(f"{', '.join(names)}: not one machine ({machines})")
    cmds = [command(names[x]) for x in (0, 1)]
    for x in (2, 3):   # the causal runs: the same commands with --causal
        if command(names[x]).replace(" --causal", "") != cmds[x - 2]:
            raise DataError(f"{names[x]}: not {names[x - 2]}'s command with --causal")
    links = ", ".join(f"[{x + 1}](%GALLERY%/{n})" for x, n in enumerate(names[:4]))
    return (table(["", "N", "forward", "causal", "backward", "causal"], list(body.values()),
                  ["---", "---:", "---:", "---:", "---:", "---:"]) +
            f"\n\n<sub>the best kernel / cuDNN, TFLOP/s, fp16, in bold where cuDNN is ahead; {machines.pop()}: " +
            "; ".join(f"`{c}`" for c in cmds) + f", each also with `--causal` (runs {links}); the backward: the runs "
            "of B15-B20's table below</sub>")


# --- the backward ------------------------------------------------------------------------------------------------

BWD_TABLE = "bench_backward_b2_20_h200_fp16.csv"   # the kernel-by-kernel table: every rung, N up to 4096
BWD_LAST = "_backward_b15_20_h200_fp16"     # bench..., sdpa... [_causal].csv: kernels 15-20 beside cuDNN, every N
NS = (512, 1024, 2048, 4096, 8192, 16384)


def run_kernels(rs):
    """The kernels a bench run timed (its rows' kernel numbers, naive's 0 left out)."""
    return sorted({int(r["kernel"]) for r in rs} - {0})


def vs_cudnn(bench, sdpa, D=128, kernels=None):
    """{N: (best kernel / cuDNN in %, the best kernel's TFLOP/s, cuDNN's)} from a backward bench and its SDPA run; the
    best of `kernels`, or of every kernel the bench timed."""
    rs, ss = rows(bench, mode="bench_backward"), rows(sdpa, mode="bench_backward")
    out = {}
    for N in NS:
        best = max(tf(pick(rs, kernel=k, N=N, D=D)) for k in (kernels or run_kernels(rs)))
        cud = tf(pick(ss, kernel=-3, N=N, D=D))
        out[N] = (100 * best / cud, best, cud)
    return out


def last_vs_cudnn(causal, D=128):
    """vs_cudnn of kernels 15-20 in the gallery's run."""
    c = "_causal" if causal else ""
    return vs_cudnn(f"bench{BWD_LAST}{c}.csv", f"sdpa{BWD_LAST}{c}.csv", D)


@part("s05-backward-last")
def backward_last():
    """The run's last two backward kernels (of 15-20) at D = 128 beside cuDNN at every N, and the run's best kernel's
    share of cuDNN, causal too."""
    rs, ss = rows(f"bench{BWD_LAST}.csv", mode="bench_backward"), rows(f"sdpa{BWD_LAST}.csv", mode="bench_backward")
    body = [[f"B{k}"] + [fmt(tf(pick(rs, kernel=k, N=N, D=128))) for N in NS] for k in run_kernels(rs)[-2:]]
    body.append(["cuDNN"] + [fmt(tf(pick(ss, kernel=-3, N=N, D=128))) for N in NS])
    for causal in (0, 1):
        v = last_vs_cudnn(causal)
        body.append([f"best / cuDNN{', causal' if causal else ''}"] + [share(v[N][0]) for N in NS])
    return (table(["D = 128"] + [f"N = {N}" for N in NS], body, ["---"] + ["---:"] * len(NS)) +
            "\n\n<sub>backward TFLOP/s, fp16, in bold where cuDNN is ahead; " + source(f"bench{BWD_LAST}.csv", "kernels") + "; " +
            source(f"sdpa{BWD_LAST}.csv", "cuDNN") + "; each also with `--causal`</sub>")


# The profile's call, which timed kernel 19 beside cuDNN first (backward/RESULTS.md#bwd-19-profile).
BWD_PROFILE = "backward/runs/k19_diagonal_start/profile_n8192/"
# The last rung's own runs beside cuDNN at D = 128 (backward/RESULTS.md#bwd-20): bench_d128_runK.csv, each beside
# sdpa_runK.csv, in its folder.
BWD_LAST_RUNS = "backward/runs/k20_split_tail/"


def backward_runs():
    """Every recorded run of the last backward kernel (the code's highest) beside cuDNN at D = 128, not causal, as
    vs_cudnn's of that kernel alone: the gallery's, its record's, and each one-call run of the three aims that timed it
    (05_cuda_fused/runs/aims_one_call*/, found by name)."""
    last = max(family_ids("bwd"))
    own = sorted(glob.glob(os.path.join(F05, BWD_LAST_RUNS, "bench_d128_run*.csv")))
    if not own:
        raise DataError(f"05_cuda_fused/{BWD_LAST_RUNS}: no bench_d128_run*.csv")
    runs = [(f"bench{BWD_LAST}.csv", f"sdpa{BWD_LAST}.csv")]
    for b in own:
        b = os.path.relpath(b, F05)
        runs.append((f05(b), f05(b.replace("bench_d128_run", "sdpa_run"))))
    for d in sorted(glob.glob(os.path.join(F05, "runs", "aims_one_call*"))):
        a = os.path.relpath(d, F05) + "/"
        if last in run_kernels(rows(f05(f"{a}race_bwd_d128.csv"), mode="bench_backward")):
            runs.append((f05(f"{a}race_bwd_d128.csv"), f05(f"{a}race_bwd_sdpa.csv")))
    out = []
    for b, c in runs:
        if last not in run_kernels(rows(b, mode="bench_backward")):
            raise DataError(f"{b}: no backward kernel {last}, the last in the code: a run from before it")
        out.append(vs_cudnn(b, c, kernels=[last]))
    return out


@part("s05-backward-gap")
def backward_gap():
    """How far the last backward kernel at D = 128 trails cuDNN at its worst N, not causal, over every recorded run of it
    beside cuDNN (the README's "by up to": an error if cuDNN leads nowhere)."""
    gap = 100 - min(r for run in backward_runs() for r, _, _ in run.values())
    if gap <= 0:
        raise DataError("the backward's runs beside cuDNN (plots/lesson_parts/step05.py, backward_runs): cuDNN leads at "
                        "no N in any; the README's sentence says it does")
    return apart(gap, 0)


@part("s05-backward-leads")
def backward_leads():
    """In how many of the last backward kernel's runs beside cuDNN (D = 128, not causal) cuDNN leads at some N, and at
    which N: "2 of 5 runs, at N = 8192"."""
    runs = backward_runs()
    lead = [run for run in runs if any(r < 100 for r, _, _ in run.values())]
    if not lead:
        raise DataError("the backward's runs beside cuDNN (plots/lesson_parts/step05.py, backward_runs): cuDNN leads in "
                        "none; the README's sentence says it leads in some")
    ns = sorted({N for run in lead for N, (r, _, _) in run.items() if r < 100})
    return f"{len(lead)} of {len(runs)} runs, at N = {' and '.join(str(N) for N in ns)}"


def pct_more_or_fewer(a, b):
    """a against b as 'N% more' or 'N% fewer'."""
    x = 100 * (a / b - 1)
    return f"{abs(x):.0f}% {'more' if x >= 0 else 'fewer'}"


def work_instructions(path):
    """The warp instructions a kernel executed, its spinning mbarrier waits left out (their number follows the timing),
    from Nsight Compute's source page in SASS kept as a CSV: every YIELD and try_wait, and the branch back after one."""
    _, lines = meta_and_lines(f05(path))
    rs = list(csv.DictReader(lines))
    if not rs:
        raise DataError(f"05_cuda_fused/{path}: no instructions in it")
    n = 0
    for i, r in enumerate(rs):
        spin = (r["sass"].startswith("YIELD") or "TRYWAIT" in r["sass"] or
                (i > 0 and "TRYWAIT" in rs[i - 1]["sass"] and "BRA" in r["sass"]))
        n += 0 if spin else int(r["warp_instructions_executed"])
    return n


def ncu_metric(path, metric):
    """One metric of the one kernel launch in an Nsight Compute `--page details --csv` report kept as a file (its '# '
    lines, ncu's own lines, then the CSV), as a number."""
    _, lines = meta_and_lines(f05(path))
    vals = {r["Metric Value"] for r in csv.DictReader(l for l in lines if l.startswith('"')) if r["Metric Name"] == metric}
    if len(vals) != 1:
        raise DataError(f"05_cuda_fused/{path}: {len(vals)} values of {metric!r}, expected the one launch's")
    return float(vals.pop().replace(",", ""))


NCU_K39, NCU_CUDNN = "forward/runs/k39_o_tma/h200_ncu_k39", "forward/runs/h200_ncu_cudnn_fwd"


@part("s05-ncu-fwd")
def ncu_fwd():
    """Kernel 39's instructions against cuDNN's causal forward at N = 512, D = 64, their spinning waits aside."""
    return pct_more_or_fewer(work_instructions(f"{NCU_K39}_sass_n512_d64_causal.csv"),
                             work_instructions(f"{NCU_CUDNN}_sass_n512_d64_causal.csv"))


@part("s05-ncu-fwd-cycles")
def ncu_fwd_cycles():
    """Kernel 39's cycles against cuDNN's at the same shape (Nsight Compute's Elapsed Cycles, one launch each)."""
    return pct_more_or_fewer(ncu_metric(f"{NCU_K39}_n512_d64_causal.txt", "Elapsed Cycles"),
                             ncu_metric(f"{NCU_CUDNN}_n512_d64_causal.txt", "Elapsed Cycles"))


NCU_K48 = "fp8/runs/k48_o_by_tma/profile/h200_ncu_k48_d128_n4096.txt"
NCU_B19 = "backward/runs/k19_diagonal_start/profile_n8192/h200_ncu_"


@part("s05-ncu-fp8-idle")
def ncu_fp8_idle():
    """The share of cycles in which no warp of FP8 kernel 48 was ready to issue, N = 4096, D = 128 (Nsight Compute)."""
    return f"{ncu_metric(NCU_K48, 'No Eligible'):.0f}%"


@part("s05-ncu-bwd-cycles")
def ncu_bwd_cycles():
    """Backward kernel 19's cycles against cuDNN's at N = 8192, D = 128, not causal (Elapsed Cycles, one launch each),
    and the one SM clock both ran at (an error if the clocks differ: the sentence says they ran at the same)."""
    f19, fcu = ncu_metric(f"{NCU_B19}b19_d128_n8192.txt", "SM Frequency"), ncu_metric(f"{NCU_B19}cudnn_bwd_d128_n8192.txt", "SM Frequency")
    if f19 != fcu:
        raise DataError(f"{NCU_B19}*: SM clocks {f19} and {fcu} GHz; the README says the two ran at the same clock")
    return pct_more_or_fewer(ncu_metric(f"{NCU_B19}b19_d128_n8192.txt", "Elapsed Cycles"),
                             ncu_metric(f"{NCU_B19}cudnn_bwd_d128_n8192.txt", "Elapsed Cycles"))


@part("s05-backward")
def backward():
    rs = rows(BWD_TABLE, mode="bench_backward", causal=0)
    body = []
    naive = [pick(rs, kernel=0, N=4096, D=D) for D in (64, 128)]
    body.append(["naive", "cuBLAS, P stored"] + [fmt(tf(r)) for r in naive])
    for k in (k for k in family_ids("bwd") if k >= 2):   # every backward kernel in the code but B1 (fp32, a CPU loop)
        name, idea = entry("bwd", k)
        if not any(int(r["kernel"]) == k for r in rs):
            raise DataError(f"plots/gallery/{BWD_TABLE}: no backward kernel {k}, which the code has: a run from before it")
        here = [pick(rs, kernel=k, N=4096, D=D) for D in (64, 128)]
        body.append([f"B{k}", name] + [fmt(tf(r)) for r in here])
    return (table(["kernel", "name", "D = 64", "D = 128"], body, ["---:", "---", "---:", "---:"]) +
            "\n\n<sub>backward TFLOP/s (2.5x the forward's FLOPs) at N = 4096, fp16; " + source(BWD_TABLE) + "</sub>")


# --- decode --------------------------------------------------------------------------------------------------------

DEC, DEC_SDPA = "decode_h200_fp16.csv", "sdpa_decode_h200_fp16.csv"


@part("s05-decode")
def decode():
    rs, ss = rows(DEC, mode="anchor"), rows(DEC_SDPA, mode="anchor")
    bw = float(rows(DEC, mode="bandwidth")[0]["gbs"])
    shapes = sorted({(int(r["B"]), int(r["Hq"]), int(r["Hkv"]), int(r["L"])) for r in ss},
                    key=lambda s: (s[2] != s[1], s[3] * s[0]))
    best = max(int(r["kernel"]) for r in rs)
    body = []
    for B, Hq, Hkv, L in shapes:
        sel = dict(B=B, Hq=Hq, Hkv=Hkv, L=L)
        k = pick(rs, kernel=best, **sel)
        fa2, cud = (pick(ss, kernel=x, **sel) for x in (-2, -3))
        body.append([f"{B}", f"{Hq} / {Hkv}", f"{L}", f"{float(k['us']):.1f}", f"{float(k['gbs']):.0f}",
                     f"{float(fa2['us']):.1f}", f"{float(cud['us']):.1f}", f"{float(cud['us']) / float(k['us']):.2f}x"])
    return (table(["B", "heads (query / KV)", "keys cached", f"decode {best}: us", "GB/s", "FlashAttention-2: us",
                   "cuDNN: us", "cuDNN's time / ours"], body) +
            f"\n\n<sub>one new row per sequence, D = 128, fp16; the read bandwidth measured in that run {bw:.0f} GB/s; " +
            source(DEC, "kernels") + "; " + source(DEC_SDPA, "FlashAttention-2 and cuDNN") + "</sub>")


# --- FP8 -------------------------------------------------------------------------------------------------------------

FP8, FP8_ERR = "fp8_bench_h200.csv", "fp8_errors_cpu.csv"


@part("s05-fp8")
def fp8():
    rs = rows(FP8, mode="bench")
    ceil = {r["dtype"]: tf(r) for r in rows(FP8, mode="ceiling")}
    ids = sorted({int(r["kernel"]) for r in rs})
    body = []
    for k in ids:
        name, idea = entry("kernel", k)
        if k == 14:
            name += " (fp16, for scale)"
        cells = []
        for D, N in ((64, 512), (128, 512), (128, 4096)):    # short rows (45-48), the aim's N (48)
            cells.append(fmt(tf(pick(rs, kernel=k, D=D, N=N))))
        body.append([f"{k}", name] + cells)
    return (table(["kernel", "name", "D = 64, N = 512", "D = 128, N = 512", "D = 128, N = 4096"], body,
                  ["---:", "---", "---:", "---:", "---:"]) +
            f"\n\n<sub>TFLOP/s, not causal; the chip's GEMM in that run: cuBLAS fp16 {ceil.get('fp16', 0):.0f}, cublasLt e4m3 "
            f"{ceil.get('fp8', 0):.0f}; " + source(FP8) + "</sub>")


@part("s05-fp8-k30-long")
def fp8_k30_long():
    """Kernel 30 (192-key tiles) over kernel 24 at D = 128, N = 16384, % (the table stops at 4096); an error where it is
    not ahead."""
    rs = rows(FP8, mode="bench", D=128, N=16384)
    a, b = tf(pick(rs, kernel=30)), tf(pick(rs, kernel=24))
    if a <= b:
        raise DataError(f"{FP8}: kernel 30 ({a}) not ahead of kernel 24 ({b}) at D = 128, N = 16384")
    return fmt(100 * (a / b - 1), 1)


@part("s05-fp8-gap")
def fp8_gap():
    """How far the best FP8 kernel at D = 128 is from FlashAttention-3's 1000 TFLOP/s at N = 4096 and 16384, %."""
    out = []
    for N in (4096, 16384):
        best = max(tf(r) for r in rows(FP8, mode="bench", dtype="fp8", D=128, N=N))
        if best >= 1000:
            raise DataError(f"{FP8}: {best} TFLOP/s at D = 128, N = {N}: the README says FP8 is short of 1000 there")
        out.append(fmt(100 * (1 - best / 1000), 1))
    return f"{out[0]}% away at N = 4096, {out[1]}% at 16384"


@part("s05-fp8-errors")
def fp8_errors():
    rs = rows(FP8_ERR)
    body = []
    for r in rs:
        if r["N"] != "1024" or r["D"] != "64":
            continue
        body.append([r["inputs"], "yes" if r["causal"] == "1" else "no", f"{float(r['fp16_rms']):.1e}",
                     f"{float(r['tensor_rms']):.1e}", f"{float(r['block_rms']):.1e}", f"{float(r['hadamard_rms']):.1e}",
                     f"{float(r['max_score']):.0f}"])
    return (table(["inputs", "causal", "fp16 storage", "FP8, a scale per tensor", "a scale per block", "blocks + Hadamard",
                   "largest score"], body, ["---", "---", "---:", "---:", "---:", "---:", "---:"]) +
            "\n\n<sub>RMS error of O against float64, N = 1024, D = 64; " + source(FP8_ERR) + "</sub>")
