"""The generated parts of 04_online_softmax/README.md (names s04-...): every figure it quotes, read from the recorded
runs in plots/gallery/ (python3 plots/lesson.py --check / --write).

  step04_cpu.txt        ./step04 --alibi --csv step04_cpu.csv --csv-state step04_state.csv
                        the worked examples, the tiled forward against naive (bit for bit too), ALiBi, decode,
                        the verification table (its CSV: step04_cpu.csv; the state of row 0: step04_state.csv)
  step04_cpu_fp16.txt   ./step04 --dtype fp16    fp16 inputs, fp32 state: the 2x-naive rule
Every part reads whatever its file holds: a rerun rewrites the figures, never the prose's shape."""
import re

from lesson import DataError, excerpt, meta_and_lines, part, rows

RUN, FP16, TABLE = "step04_cpu.txt", "step04_cpu_fp16.txt", "step04_cpu.csv"


def grab(name, pattern, group=1):
    """Group `group` of the first line of a recorded output that matches `pattern`."""
    for line in meta_and_lines(name)[1]:
        m = re.search(pattern, line)
        if m:
            return m.group(group)
    raise DataError(f"plots/gallery/{name}: no line matches {pattern!r}")


# --- Step 3: the streaming softmax on one vector --------------------------------------------------------------------

@part("s04-worked")
def worked():
    return excerpt(RUN, [("range", r"^scores \[2\.00", r"^  \(the lesson prints")])


@part("s04-d1")
def d1():
    return grab(RUN, r"after block 1 \[ 2\.00, -1\.50\]: m = [\d.]+, d = ([\d.]+)")


@part("s04-d2")
def d2():
    return grab(RUN, r"after block 2 \[ 0\.30,  4\.20\]: m = [\d.]+, d = ([\d.]+)")


# --- Step 4: against naive, and bit for bit ---------------------------------------------------------------------------

@part("s04-verify")
def verify():
    return excerpt(RUN, [r"^-- the tiled forward:", r"^max absolute difference", r"^error vs float64",
                         ("range", r"^bit for bit", r"^answer: not bit for bit"), r"^memory beyond"])


@part("s04-diff")
def diff():
    return grab(RUN, r"^max absolute difference vs naive .*: ([\d.e+-]+)")


@part("s04-same-pct")
def same_pct():
    return grab(RUN, r"^bit for bit vs naive .*identical \(([\d.]+%)\)")


@part("s04-bits-maxabs")
def bits_maxabs():
    return grab(RUN, r"^bit for bit vs naive .*identical \([\d.]+%\), max abs ([\d.e+-]+)")


@part("s04-same-one-pct")
def same_one_pct():
    return grab(RUN, r"with one K/V tile .*identical \(([\d.]+%)\)")


@part("s04-naive-err")
def naive_err():
    return grab(RUN, r"^bit for bit vs naive .*vs float64: naive ([\d.e+-]+)")


@part("s04-tiled-err")
def tiled_err():
    return grab(RUN, r"^bit for bit vs naive .*vs float64: naive [\d.e+-]+, tiled ([\d.e+-]+)")


@part("s04-mem-naive")
def mem_naive():
    return grab(RUN, r"^memory beyond Q, K, V, O: naive ([\d.]+ [KMG]?B)")


@part("s04-mem-tiled")
def mem_tiled():
    return grab(RUN, r"^memory beyond Q, K, V, O: .*tiled ([\d.]+ [KMG]?B)")


@part("s04-table")
def verification_table():
    """A few rows of the verification table (N = 1, a multiple of every block, N not a multiple of any) and its two
    closing lines: the block sizes agree to rounding."""
    return excerpt(RUN, [r"^\s+N\s+D\s+BR=16", r"^\s+64\s+64\s", r"^\s+257\s+64\s", r"^\s+513\s+128\s",
                         r"^block size independence", r"^answer: in fp32"])


@part("s04-indep")
def indep():
    return grab(RUN, r"^block size independence: .* = ([\d.e+-]+)")


@part("s04-worst")
def worst():
    """The largest max abs of the whole table, from its CSV (every N, D and block size)."""
    rs = rows(TABLE, dtype="fp32")
    if not rs:
        raise DataError(f"plots/gallery/{TABLE}: no fp32 rows")
    return f"{max(float(r['max_abs']) for r in rs):.1e}"


@part("s04-cases")
def cases():
    """How many (N, D, block size) runs the table holds, from its CSV."""
    return str(len(rows(TABLE, dtype="fp32")))


# --- fp16 ---------------------------------------------------------------------------------------------------------------

@part("s04-fp16-source")
def fp16_source():
    """The fp16 run, named: its figures are quoted inline."""
    m = meta_and_lines(FP16)[0]
    if not m.get("machine") or not m.get("command"):
        raise DataError(f"plots/gallery/{FP16}: no identity lines")
    return f"[{FP16}](%GALLERY%/{FP16})"


@part("s04-fp16-tiled")
def fp16_tiled():
    return grab(FP16, r"^fp16: tiled max abs ([\d.e+-]+)")


@part("s04-fp16-naive")
def fp16_naive():
    return grab(FP16, r"^fp16: .*naive with fp16 storage ([\d.e+-]+)")


# --- question 5: a score modifier ---------------------------------------------------------------------------------------

@part("s04-alibi")
def alibi():
    return excerpt(RUN, [r"^-- ALiBi", r"^tiled with ALiBi", r"^answer: a score modifier"])
