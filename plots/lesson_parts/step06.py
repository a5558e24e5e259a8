"""The generated parts of 06_causal/README.md (names s06-...) and 06_causal/RESULTS.md (s06r-...): every figure
they quote, read from the recorded runs in plots/gallery/ (python3 plots/lesson.py --check / --write).

The CPU runs (2-core machine, no GPU; the programs are deterministic but for their times):
  step06_cpu.txt                   ./step06 --alibi                      the mask, block skipping, the tile-relative bug
  step06_check_cpu.txt             ./step06 --check
  step06_train_cpu.txt             ./step06 --train --save m.bin         the chapter's Step 6, five attentions
  step06_generate_cpu.txt          ./step06 --generate --load m.bin      the KV cache
  step06_break1_overflow_cpu.txt   ./step06 --train --corpus lag-copy --score-scale 16 --steps 120
  train_cpu_text_200.csv, train_cpu_text_1000.csv, train_cpu_lagcopy_200.csv   the loss curves (--csv)
The GPU runs: step06_h200_fp16.csv (causal vs not, every kernel), train_gpu_h100_200.csv (the GPT on the GPU beside
the CPU), train_gpu_big_h200.csv and train_gpu_big_h200_16G.csv (--big, and under --mem-limit 16G).
Every part reads whatever its file holds: a rerun rewrites the figures, never the prose's shape."""
import re

from lesson import DataError, command, excerpt, fmt, gpu_name, grab, machine, meta, meta_and_lines, part, rows, source, table

MASK = "step06_cpu.txt"
CHECK = "step06_check_cpu.txt"
TRAIN = "step06_train_cpu.txt"
GEN = "step06_generate_cpu.txt"
OVERFLOW = "step06_break1_overflow_cpu.txt"
CSV_TEXT, CSV_TEXT_LONG, CSV_LAG = "train_cpu_text_200.csv", "train_cpu_text_1000.csv", "train_cpu_lagcopy_200.csv"
CAUSAL_GPU = "step06_h200_fp16.csv"
GPU200 = "train_gpu_h100_200.csv"
BIG, BIG16 = "train_gpu_big_h200.csv", "train_gpu_big_h200_16G.csv"


# --- reading ----------------------------------------------------------------------------------------------------

def excerpt_where(name, keep, caption=True):
    """An output block of the lines whose indices keep(lines) returns, '...' where lines are left out, and the
    run's source under it: lesson.excerpt's format, for picks a regular expression cannot say (the first two and
    the last of a list)."""
    _, lines = meta_and_lines(name)
    idx = keep(lines)
    out, gap = [], False
    for i, line in enumerate(lines):
        if i in idx:
            if gap and out:
                out.append("...")
            out.append(line.rstrip())
            gap = False
        else:
            gap = True
    text = "```\n" + "\n".join(out) + "\n```"
    return text + ("\n\n<sub>" + source(name) + "</sub>" if caption else "")


def curves(name):
    """{(run, split): {step: loss}} of a --train --csv file."""
    out = {}
    for r in rows(name):
        out.setdefault((r["run"], r["split"]), {})[int(r["step"])] = float(r["loss"])
    if not out:
        raise DataError(f"plots/gallery/{name}: no rows")
    return out


def last(c, run, split):
    pts = c.get((run, split))
    if not pts:
        raise DataError(f"no {run} {split} curve")
    return pts[max(pts)]


def gb(x):
    return f"{float(x) / 1e9:.2f} GB"


# --- the causal mask on the CPU (step06_cpu.txt) ------------------------------------------------------------------

@part("s06-mask-out")
def mask_out():
    """The causal run, the tiles visited against non-causal's and their formula (the lesson names the shape; the
    header and the non-causal run's line are in the file)."""
    return excerpt(MASK, [r"^causal:", r"^causal visited", r"^formula:"])


@part("s06-cpu-speedup")
def cpu_speedup():
    return grab(MASK, r"took (\S+x) less time")


@part("s06-relative-out")
def relative_out():
    def keep(lines):
        rows_at = [i for i, l in enumerate(lines) if re.match(r"^  rows +\d+\.\.", l)]
        if len(rows_at) < 2:
            raise DataError(f"plots/gallery/{MASK}: no row tiles of the tile-relative mask")
        head = [i for i, l in enumerate(lines) if re.match(r"^mask from tile-relative|^first wrong row", l)]
        return set(head + rows_at[:2] + rows_at[-1:])
    return excerpt_where(MASK, keep, caption=False)


@part("s06-first-wrong")
def first_wrong():
    return grab(MASK, r"^first wrong row: (\d+)")


@part("s06-alibi-err")
def alibi_err():
    return grab(MASK, r"^causal with ALiBi.*same bias: (max abs \S+),")


# --- causal against non-causal on the GPU (step06_h200_fp16.csv) --------------------------------------------------

def causal_rows():
    rs = [r for r in rows(CAUSAL_GPU) if r["device"] == "gpu"]
    if not rs:
        raise DataError(f"plots/gallery/{CAUSAL_GPU}: no GPU rows")
    return rs


def speedup(r):
    return float(r["ms_full"]) / float(r["ms_causal"])


def kname(r):
    return r["kernel"].replace("kernel", "kernel ")


@part("s06-gpu-causal-where")
def gpu_causal_where():
    r = causal_rows()[0]
    return f"{gpu_name(CAUSAL_GPU)}, {r['dtype']}, B = {r['B']}, H = {r['H']}, N = {r['N']}, D = {r['D']}"


@part("s06-gpu-speedup-range")
def gpu_speedup_range():
    rs = causal_rows()
    lo, hi = min(rs, key=speedup), max(rs, key=speedup)
    return f"{speedup(lo):.2f}x ({kname(lo)}) to {speedup(hi):.2f}x ({kname(hi)})"


@part("s06-gpu-fastest-causal")
def gpu_fastest_causal():
    r = min(causal_rows(), key=lambda r: float(r["ms_causal"]))
    return f"{kname(r)}, {float(r['ms_causal']):.3f} ms"


@part("s06r-gpu-causal-table")
def gpu_causal_table():
    body = [(kname(r), f"{float(r['ms_full']):.3f}", f"{float(r['tflops_full']):.1f}", f"{float(r['ms_causal']):.3f}",
             f"{float(r['tflops_causal']):.1f}", f"{speedup(r):.2f}x") for r in causal_rows()]
    return (table(["kernel", "non-causal ms", "TFLOP/s", "causal ms", "TFLOP/s (half the FLOPs)", "speed-up"], body)
            + f"\n\n<sub>{source(CAUSAL_GPU)}</sub>")


# --- the chapter's Step 6 on the CPU (step06_train_cpu.txt and the --csv files) -------------------------------------

@part("s06-train-out")
def train_out():
    return excerpt(TRAIN, [r"^ step \|", r"^      \|    naive", r"^    1 \|", r"^  200 \|"])


@part("s06-bigram")
def bigram():
    return grab(TRAIN, r"no better than (\S+) nats")


@part("s06-val-200")
def val_200():
    return fmt(last(curves(CSV_TEXT), "naive", "val"), 3)


@part("s06-gap-max")
def gap_max():
    return grab(TRAIN, r"loss\(naive\)\| over the \d+ steps is (\S+ \(step \d+\))")


@part("s06-gap-step1")
def gap_step1():
    return grab(TRAIN, r"before any update, (\S+) \(")


@part("s06-break1-drift")
def break1_drift():
    return grab(TRAIN, r"drifts (\S+) from naive")


@part("s06-max-score")
def max_score():
    return grab(TRAIN, r"the largest score this model reached is (\S+),")


@part("s06-overflow-out")
def overflow_out():
    return excerpt(OVERFLOW, [r"^answer: Break 1"])


@part("s06-claims-table")
def claims_table():
    """The validation loss at the end of each corpus and length: where the chapter's claims show (the lesson's:
    without the tile-relative run's loss under its own mask, which the record's s06r-claims-table adds)."""
    return claims(own_mask=False)


@part("s06r-claims-table")
def record_claims_table():
    return claims(own_mask=True)


def claims(own_mask):
    body = []
    for name in (CSV_TEXT, CSV_TEXT_LONG, CSV_LAG):
        c = curves(name)
        steps = max(c[("naive", "val")])
        extra = re.sub(r"^\./step06 --train|--csv \S+|--steps \d+", "", command(name)).strip()
        own = [fmt(last(c, "relative", "val_own_mask"), 3)] if own_mask else []
        body.append([f"{'`' + extra + '`' if extra else 'the text'}, {steps} steps",
                     fmt(last(c, "naive", "val"), 3), fmt(last(c, "tiled", "val"), 3),
                     fmt(last(c, "relative", "val"), 3)] + own +
                    [fmt(last(c, "break2", "val"), 3), fmt(last(c, "break1", "val"), 3)])
    src = ", ".join(f"[{n}](%GALLERY%/{n})" for n in (CSV_TEXT, CSV_TEXT_LONG, CSV_LAG))
    head = ["run", "naive", "tiled"] + (["tile-relative (right mask)", "tile-relative (own mask)"] if own_mask
                                        else ["tile-relative"])
    return (table(head + ["Break 2", "Break 1"], body)
            + f"\n\n<sub>validation loss at the last step, nats; {machine(CSV_TEXT)}; {src}</sub>")


def b2_gap(name):
    c = curves(name)
    return fmt(last(c, "break2", "val") - last(c, "naive", "val"), 2)


@part("s06-b2-gap-long")
def b2_gap_long():
    return b2_gap(CSV_TEXT_LONG)


@part("s06-b2-gap-lag")
def b2_gap_lag():
    return b2_gap(CSV_LAG)


@part("s06-wall-out")
def wall_out():
    """The lesson's: the first T where naive fails, and the answer."""
    return excerpt(TRAIN, [r"^\s+T\s+naive \(of which P\)", r"^\s+8192\s", r"^answer: under"], caption=False)


@part("s06r-wall-out")
def record_wall_out():
    """The record's: the first T where naive fails, the largest tried, and the answer."""
    return excerpt(TRAIN, [r"^\s+T\s+naive \(of which P\)", r"^\s+(8192|32768)\s", r"^answer: under"], caption=False)


# --- the GPU training (train_gpu_h100_200.csv, train_gpu_big_h200*.csv) ---------------------------------------------

@part("s06-gpu200-name")
def gpu200_name():
    return gpu_name(GPU200)


@part("s06-gpu200")
def gpu200():
    """The GPU's naive and fused runs and the CPU's naive one: their largest gap and their last validation loss."""
    c = curves(GPU200)
    runs = ("gpu-naive", "gpu-fused", "cpu-naive")
    steps = sorted(c[("gpu-naive", "train")])
    gap = max(abs(c[(a, "train")][s] - c[(b, "train")][s]) for s in steps for a in runs for b in runs)
    vals = [f"{last(c, r, 'val'):.6f}" for r in runs]
    val = f"all at {vals[0]}" if len(set(vals)) == 1 else "at " + ", ".join(vals)
    return (f"the three losses agree at all {len(steps)} steps to {gap:.0e} (the CSV's last decimal) and end in "
            f"validation {val} ([{GPU200}](%GALLERY%/{GPU200}))")


def big_rows(name):
    rs = rows(name)
    if not rs:
        raise DataError(f"plots/gallery/{name}: no rows")
    return rs


def big_row(rs, T, attn):
    for r in rs:
        if r["T"] == str(T) and r["attention"] == attn:
            return r
    return None


@part("s06-big-table")
def big_table():
    """--big at the smallest and the largest T of the run: each attention's time per step and memory, a row per T;
    a fused run's speed-up over the naive run of its type in brackets."""
    rs = big_rows(BIG)
    Ts = sorted({int(r["T"]) for r in rs})
    attns = ("naive", "fused", "naive-bf16", "fused-bf16")
    body = []
    for T in sorted({Ts[0], Ts[-1]}):
        row = [T]
        for attn in attns:
            r = big_row(rs, T, attn)
            if r is None:
                row.append("")
                continue
            if r["fits"] != "1":
                row.append(f"OOM, asked {gb(r['bytes'])}")
                continue
            cell = f"{float(r['ms_per_step']):.2f} ms, {gb(r['peak_bytes'])}"
            if attn.startswith("fused"):
                n = big_row(rs, T, attn.replace("fused", "naive"))
                if n is not None and n["fits"] == "1":
                    cell += f" ({float(n['ms_per_step']) / float(r['ms_per_step']):.2f}x)"
            row.append(cell)
        body.append(row)
    return (table(["T"] + list(attns), body)
            + f"\n\n<sub>ms per step, memory (fused's speed-up over naive); {source(BIG)}</sub>")


def first_oom(rs, attn):
    for r in sorted(rs, key=lambda r: int(r["T"])):
        if r["attention"] == attn and r["fits"] != "1":
            return r
    return None


def largest_fit(rs, attn):
    ok = [r for r in rs if r["attention"] == attn and r["fits"] == "1"]
    return max(ok, key=lambda r: int(r["T"])) if ok else None


@part("s06-big16-wall")
def big16_wall():
    rs = big_rows(BIG16)
    out = []
    for attn in ("naive", "naive-bf16"):
        r = first_oom(rs, attn)
        if r is not None:
            out.append(f"{'naive fp32' if attn == 'naive' else attn} stops at T = {r['T']} (asks {gb(r['bytes'])})")
    f = largest_fit(rs, "fused-bf16")
    if f is not None:
        out.append(f"fused-bf16 still trains at T = {f['T']} in {gb(f['peak_bytes'])}")
    return "; ".join(out)


@part("s06-big-gpu")
def big_gpu():
    return gpu_name(BIG)


# --- generation with the KV cache (step06_generate_cpu.txt) ----------------------------------------------------------

@part("s06-gen-out")
def gen_out():
    def keep(lines):
        dashes = [i for i, l in enumerate(lines) if l.strip() == "---"]
        if len(dashes) < 2:
            raise DataError(f"plots/gallery/{GEN}: no text between '---' lines")
        rest = [i for i, l in enumerate(lines) if re.match(r"^check \(cpu\)", l)]
        return set(range(dashes[0], dashes[1] + 1)) | set(rest)
    text = excerpt_where(GEN, keep)
    # the generated text, its first 100 characters: enough to see the corpus's syllables
    return "\n".join(l[:100].rstrip() + " [...]" if len(l) > 100 and not l.startswith(("check", "<sub>")) else l
                     for l in text.split("\n"))


@part("s06-gen-diff")
def gen_diff():
    return grab(GEN, r"^check \(cpu\).*max \|diff\| (\S+)")


@part("s06-gen-speedup")
def gen_speedup():
    return grab(GEN, r"every layer \((\S+x)\)")


# --- the checks (step06_check_cpu.txt) ----------------------------------------------------------------------------

@part("s06-bwd-out")
def bwd_out():
    """FlashAttention-2's backward against naive's, one check line: the same gradients, and the memory each needs."""
    return excerpt(CHECK, [r"^PASS tiled-bwd/causal N=130 "])


# --- the record's figures from this machine's runs ------------------------------------------------------------------

@part("s06r-cpu-timings")
def record_cpu_timings():
    """The wall-clock figures of the recorded CPU runs, one line each."""
    lines = []
    for name in (TRAIN, OVERFLOW):
        what = grab(name, r"^(\d+ steps of \d+ runs in \S+ s)")
        lines.append(f"- `{command(name)}`: {what} ({machine(name)}, {meta(name, 'date')}, "
                     f"commit {meta(name, 'commit')}; [{name}](%GALLERY%/{name}))")
    return "\n".join(lines)


@part("s06r-mask-full")
def record_mask_full():
    return excerpt(MASK, [r""])


@part("s06r-gen-full")
def record_gen_full():
    return excerpt(GEN, [r""])


@part("s06r-big-full")
def record_big_full():
    """Every row of the --big CSV, as the program prints its table."""
    body = []
    for r in big_rows(BIG):
        if r["fits"] != "1":
            body.append((r["T"], r["attention"], "OOM", "", f"asked {gb(r['bytes'])}", "", "", ""))
            continue
        body.append((r["T"], r["attention"], f"{float(r['ms_per_step']):.2f}", f"{float(r['tokens_per_s']):.0f}",
                     gb(r["peak_bytes"]), f"{100 * float(r['attn_ms']) / float(r['ms_per_step']):.0f}%",
                     r["first_loss"], r["last_loss"]))
    return (table(["T", "attention", "ms/step", "tokens/s", "memory", "attention's share", "first loss", "last loss"],
                  body) + f"\n\n<sub>{source(BIG)}</sub>")


@part("s06r-check-cpu")
def record_check_cpu():
    closing = grab(CHECK, r"^(step06: \d+ passed, \d+ failed, \d+ skipped)")
    return (f"`{command(CHECK)}` on {machine(CHECK)} ({meta(CHECK, 'date')}, commit {meta(CHECK, 'commit')}): "
            f"`{closing}` "
            f"([{CHECK}](%GALLERY%/{CHECK}), every line)")
