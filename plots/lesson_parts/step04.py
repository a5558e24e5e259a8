"""The generated parts of 04_online_softmax/README.md (names s04-...): every figure it quotes, read from the recorded
runs in plots/gallery/ (python3 plots/lesson.py --check / --write).

  step04_cpu.txt        ./step04 --alibi --csv step04_cpu.csv --csv-state step04_state.csv
                        the worked examples, the tiled forward against naive (bit for bit too), ALiBi, decode,
                        the verification table (its CSV: step04_cpu.csv; the state of row 0: step04_state.csv)
  step04_cpu_fp16.txt   ./step04 --dtype fp16    fp16 inputs, fp32 state: the 2x-naive rule
Every part reads whatever its file holds: a rerun rewrites the figures, never the prose's shape."""

from lesson import command, excerpt, grab, machine, part

RUN, FP16 = "step04_cpu.txt", "step04_cpu_fp16.txt"


# --- Step 3: the streaming softmax on one vector --------------------------------------------------------------------

@part("s04-worked")
def worked():
    """Lesson 002's example, block by block, against the direct softmax, and why the lesson prints 1.135."""
    return excerpt(RUN, [("range", r"^scores \[2\.00", r"^  direct softmax:"), r"^  \(the lesson prints"])


@part("s04-d1")
def d1():
    return grab(RUN, r"after block 1 \[ 2\.00, -1\.50\]: m = [\d.]+, d = ([\d.]+)")


@part("s04-d2")
def d2():
    return grab(RUN, r"after block 2 \[ 0\.30,  4\.20\]: m = [\d.]+, d = ([\d.]+)")


# --- Step 4: against naive, and bit for bit ---------------------------------------------------------------------------

@part("s04-verify")
def verify():
    """The same run as s04-worked, whose caption names it. The chapter's max absolute difference, the bit-for-bit lines and their answer, the memory beyond Q, K, V, O
    (the error against float64 with its tolerance is in the file: the bit-for-bit line gives both errors)."""
    return excerpt(RUN, [r"^-- the tiled forward:", r"^max absolute difference",
                         ("range", r"^bit for bit", r"^answer: not bit for bit"), r"^memory beyond"], caption=False)


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


@part("s04-table")
def verification_table():
    """Two rows of the verification table (N not a multiple of any block) and its two
    closing lines: the block sizes agree to rounding. The same run as s04-worked, whose caption names it."""
    return excerpt(RUN, [r"^\s+N\s+D\s+BR=16", r"^\s+257\s+64\s", r"^\s+513\s+128\s",
                         r"^block size independence", r"^answer: in fp32"], caption=False)


# --- fp16 ---------------------------------------------------------------------------------------------------------------

@part("s04-fp16-source")
def fp16_source():
    """The fp16 run, named: its figures are quoted inline."""
    machine(FP16), command(FP16)  # its identity lines, or a DataError
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
    return excerpt(RUN, [r"^tiled with ALiBi", r"^answer: a score modifier"], caption=False)
