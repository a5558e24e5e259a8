"""step07.py: the generated parts of 07_break_it/README.md and 07_break_it/EXERCISES.md, from step 07's recorded runs
in plots/gallery/ (each written by plots/record.sh):

    step07_cpu.txt              ./step07                                   Break 1's sweep, Break 2, the answer lines
    trace_cpu_fp16.csv, _fp32   ./step07 --break no-max ... --trace --csv   Break 1 per K/V tile (break_trace_cpu.png)
    step07_break2_n65.txt       ./step07 --break no-rescale --seq 65
    step07_max_zero.txt         ./step07 --break max-zero
    step07_alibi_relative.txt   ./step07 --break alibi-relative
    step07_alibi_after_max.txt  ./step07 --break alibi-after-max
    step07_grade_numpy.txt      sh plots/gallery/step07_grade_numpy.sh      the grader on step07_student.py (NumPy)
"""
import os
import re

from lesson import DataError, GALLERY, command, excerpt, fmt, grab, meta_and_lines, part, rows, source, table

CPU = "step07_cpu.txt"
GRADE = "step07_grade_numpy.txt"
STUDENT = "step07_student.py"


def lines(name):
    return meta_and_lines(name)[1]


def block(text, name=None):
    """An output block, with the caption naming the run as excerpt() writes it (none for a run named just before)."""
    return "```\n" + "\n".join(text) + "\n```" + ("\n\n<sub>" + source(name) + "</sub>" if name else "")


def cut(line, n=150):
    return line if len(line) <= n else line[:n].rstrip() + " [...]"


# --- Break 1 and Break 2 (./step07) -------------------------------------------------------------------------------

SWEEP = r"^  (fp16|fp32) scale +([\d.]+): max score +([\d.]+)  inf/NaN"


def first_overflow(dt):
    for l in lines(CPU):
        m = re.search(SWEEP, l)
        if m and m.group(1) == dt:
            return m
    raise DataError(f"plots/gallery/{CPU}: no {dt} sweep line says inf/NaN")


def first_inf(dt):
    return re.search(r"first inf appeared in K/V tile (\d+) \((\w) of query row (\d+); largest score there ([\d.]+)",
                     grab(CPU, rf"^answer: in {dt} the first inf appeared.*", 0))


@part("s07-run")
def s07_run():
    """./step07: the header and Break 1's answer lines."""
    return excerpt(CPU, [r"^step07: BREAK IT", r"^answer: (Break 1|in fp)"])


@part("s07-max-s")
def s07_max_s():
    return grab(CPU, r"score scale 1: max score ([\d.]+)")


@part("s07-fp16-scale")
def s07_fp16_scale():
    return fmt(first_overflow("fp16").group(2), 0)


@part("s07-fp32-scale")
def s07_fp32_scale():
    return fmt(first_overflow("fp32").group(2), 0)


@part("s07-ratio")
def s07_ratio():
    return grab(CPU, r"fp16 fails at scores (\d+)x smaller")


@part("s07-fp16-tile")
def s07_fp16_tile():
    return first_inf("fp16").group(1)


@part("s07-fp32-tile")
def s07_fp32_tile():
    return first_inf("fp32").group(1)


@part("s07-fp16-tile-max")
def s07_fp16_tile_max():
    return first_inf("fp16").group(4)


@part("s07-fp32-score")
def s07_fp32_score():
    return first_inf("fp32").group(4)


@part("s07-trace")
def s07_trace():
    """Break 1's traced row per K/V tile, fp16 at its first overflowing scale and fp32 at its, from the CSVs that
    break_trace_cpu.png is drawn from."""
    runs = []
    for name in ("trace_cpu_fp16.csv", "trace_cpu_fp32.csv"):
        rs = rows(name)
        if not rs:
            raise DataError(f"plots/gallery/{name}: no rows")
        runs.append((name, rs))
    n = len(runs[0][1])
    if any(len(rs) != n for _, rs in runs):
        raise DataError("the two trace CSVs have different numbers of K/V tiles")

    def g(x):
        v = float(x)
        return "**inf**" if v == float("inf") else f"{v:.4g}"

    head = ["K/V tile"]
    for _, rs in runs:
        r0 = rs[0]
        head += [f"{r0['dtype']} (scale {r0['score_scale']}, row {r0['row']}): max s", "max p", "l", "max \\|o\\|"]
    body = []
    for t in range(n):
        row = [runs[0][1][t]["tile"]]
        for _, rs in runs:
            r = rs[t]
            row += [fmt(r["max_s"], 2), g(r["max_p"]), g(r["l"]), g(r["max_o"])]
        body.append(row)
    caption = "<sub>" + source(runs[0][0], "fp16") + "; fp32: `" + command(runs[1][0]) + \
        f"` ([{runs[1][0]}](%GALLERY%/{runs[1][0]}))</sub>"
    return table(head, body, ["---:"] * len(head)) + "\n\n" + caption


@part("s07-b2-tiles")
def s07_b2_tiles():
    return grab(CPU, r"^answer: Break 2 .* wrong with (\d+) K/V tiles")


@part("s07-b2-max-abs")
def s07_b2_max_abs():
    return grab(CPU, r"^answer: Break 2 .* wrong with \d+ K/V tiles \(max abs ([\d.]+)")


@part("s07-b2-one-tile")
def s07_b2_one_tile():
    return grab(CPU, r"^answer: Break 2 .*right with one tile, BC = N \(max abs ([\d.e+-]+)\)")


@part("s07-b2-n65")
def s07_b2_n65():
    return grab("step07_break2_n65.txt", r"^answer: Break 2 .* wrong with 2 K/V tiles \(max abs ([\d.]+)")


@part("s07-intact")
def s07_intact():
    return grab(CPU, r"--break none +fp32: finite, max abs ([\d.e+-]+)")


@part("s07-intact-fp16")
def s07_intact_fp16():
    return grab(CPU, r"--break none +fp16: finite, max abs ([\d.e+-]+)")


@part("s07-b1-unit-fp16")
def s07_b1_unit_fp16():
    return grab(CPU, r"--break no-max +fp16: finite, max abs ([\d.e+-]+)")


@part("s07-max-zero")
def s07_max_zero():
    return grab("step07_max_zero.txt", r"(\d+ of \d+) outputs bad")


# --- question 5: ALiBi in its two wrong places ---------------------------------------------------------------------

@part("s07-alibi-rel")
def s07_alibi_rel():
    return grab("step07_alibi_relative.txt", r"finite and wrong \(max abs ([\d.]+)\)")


@part("s07-alibi-rel-one")
def s07_alibi_rel_one():
    return grab("step07_alibi_relative.txt", r"right with one \(([\d.e+-]+)\)")


@part("s07-alibi-max-random")
def s07_alibi_max_random():
    return grab("step07_alibi_after_max.txt", r"right on random inputs \(max abs ([\d.e+-]+)\)")


@part("s07-alibi-max-h4")
def s07_alibi_max_h4():
    return grab("step07_alibi_after_max.txt", r"o / l = NaN: (\d+) outputs with H = 4")


@part("s07-alibi-max-h8")
def s07_alibi_max_h8():
    return grab("step07_alibi_after_max.txt", r"the same with H = 8 .*--break alibi-after-max (\d+ of \d+) outputs inf/NaN")


# --- the grader on a NumPy student (step07_grade_numpy.txt) --------------------------------------------------------

def runs():
    """The transcript as (command, output lines, exit code), one per '$ ' line."""
    out, cmd, body = [], None, []
    for l in lines(GRADE):
        if l.startswith("$ "):
            cmd, body = l[2:], []
        elif cmd is not None and re.match(r"^\(exit (\d+)\)$", l):
            out.append((cmd, body, int(l[6:-1])))
            cmd = None
        elif cmd is not None:
            body.append(l)
    if not out:
        raise DataError(f"plots/gallery/{GRADE}: no '$ ' command with its '(exit N)'")
    return out


def run_of(pattern):
    hits = [r for r in runs() if re.search(pattern, r[0])]
    if not hits:
        raise DataError(f"plots/gallery/{GRADE}: no command matches {pattern!r}")
    return hits[0]


def student_runs():
    """(mode, output lines, exit) of each plain grade of the student: `python3 ...student.py DIR MODE && ./step07 --grade DIR`."""
    out = []
    for cmd, body, rc in runs():
        m = re.match(r"python3 \S+step07_student\.py \S+ (\S+) && \./step07 --grade \S+$", cmd)
        if m:
            out.append((m.group(1), body, rc))
    if not out:
        raise DataError(f"plots/gallery/{GRADE}: no grade of step07_student.py")
    return out


def set_lines(body):
    """{set: (status, description, rest)} from a grade's PASS / FAIL / MISSING lines."""
    sets = {}
    for l in body:
        m = re.match(r"^  (PASS|FAIL|MISSING) +(\w+) +(.*?): (max abs .*|\d+ of \d+ outputs wrong.*|not graded: .*|"
                     r"out_\w+\.npy not found)$", l)
        if m:
            sets[m.group(2)] = (m.group(1), m.group(3), m.group(4))
    return sets


def diagnosis(body):
    g = next((l for l in body if l.startswith("grade: ")), None)
    if g is None:
        raise DataError(f"plots/gallery/{GRADE}: a grade without its 'grade:' line")
    m = re.match(r"grade: wrong\. diagnosis: (.*?)(?:: |$)", g)
    if m:
        return m.group(1)
    return "every set right" if g.startswith("grade: every set right") else g[7:]


def student_modes():
    """{mode: what it does} from the student script's header (its '# mode   what' lines)."""
    with open(os.path.join(GALLERY, STUDENT)) as f:
        modes = {}
        for l in f:
            m = re.match(r"^# ([a-z0-9-]+) {2,}(.*)$", l)
            if m:
                modes[m.group(1)] = m.group(2).strip()
    if not modes:
        raise DataError(f"plots/gallery/{STUDENT}: no '# mode  what it does' lines")
    return modes


# the modes the guide's table shows: the right student, the chapter's own snippet, a float64 run, the chapter's three
# breaks, the stale max, the tile-relative mask, and a bug no break makes; every mode's whole conclusion is in
# 07_break_it/RESULTS.md#grader-logs
STUDENTS_SHOWN = {"fixed", "chapter", "float64", "no-max", "no-rescale", "max-zero", "first-max", "relative-mask",
                  "diagonal"}


@part("s07-students")
def s07_students():
    """The NumPy student's modes in STUDENTS_SHOWN: the sets each fails and the grader's diagnosis."""
    modes = student_modes()
    graded = {mode for mode, _, _ in student_runs()}
    if STUDENTS_SHOWN - graded:
        raise DataError(f"plots/gallery/{GRADE}: no grade of the modes {sorted(STUDENTS_SHOWN - graded)}")
    body = []
    for mode, out, rc in student_runs():
        if mode not in modes:
            raise DataError(f"plots/gallery/{STUDENT}: mode {mode} not described in its header")
        if mode not in STUDENTS_SHOWN:
            continue
        sets = set_lines(out)
        failed = [s for s, (st, _, _) in sets.items() if st != "PASS"]
        notes = sum(1 for l in out if l.startswith("note: "))
        d = re.sub(r" \(none of the known breaks.*\)$", "", diagnosis(out)) + (" (+ float64 note)" if notes else "")
        passed = [s for s in sets if s not in failed]
        body.append([f"`{mode}`", "all" if not passed else "all but " + passed[0] if len(passed) == 1 else
                     ", ".join(failed) or "none", d])
    return table(["mode", "sets failed", "the grader's diagnosis"], body, ["---", "---", "---"]) + \
        "\n\n<sub>" + source(GRADE) + "</sub>"


CATCHES = {  # what each set is there to catch: the grader's design (grade.c), checked by the table of students
    "multi": "Break 2: finite and wrong with several K/V tiles",
    "one_tile": "... and right with one",
    "negative": "Break 3 in float32 (0/0)",
    "causal": "a tile-relative mask; a wholly masked tile's NaN; a dropped last tile",
    "large": "Break 1 in float32",
    "huge": "Break 1 in float64; a dropped last tile; a float64 run",
    "alibi": "ALiBi after the max, or from tile-relative indices",
    "late_max": "p = e^(s - m) against a stale max (the first tile's m kept, or p before m_new)",
    "very_neg": "Break 3 in float64; m started at a finite value such as -10000",
    "ragged": "K, V zero-padded to whole tiles, the padded keys not masked",
}


@part("s07-sets")
def s07_sets():
    """The sets as the grader describes them (the right student's grade), and what each is there to catch."""
    right = next((out for mode, out, rc in student_runs() if mode == "fixed"), None)
    if right is None:
        raise DataError(f"plots/gallery/{GRADE}: no grade of the right student (mode fixed)")
    sets = set_lines(right)
    if set(sets) != set(CATCHES):
        raise DataError(f"plots/gallery/{GRADE}: the sets {sorted(sets)} are not the ones described {sorted(CATCHES)}")
    body = [[f"`{s}`", desc, CATCHES[s]] for s, (_, desc, _) in sets.items()]
    return table(["set", f"inputs [1, H, N, 64] ([as graded](%GALLERY%/{GRADE}))", "there to catch"], body,
                 ["---", "---", "---"])


@part("s07-tol")
def s07_tol():
    return grab(GRADE, r"^step07 --grade \S+: \d+ input sets, .*?, tolerance (.*)$")


@part("s07-nsets")
def s07_nsets():
    return grab(GRADE, r"^step07 --assignment: wrote q, k and v of (\d+) sets")


@part("s07-grade-bad")
def s07_grade_bad():
    cmd, body, rc = run_of(r"step07_student\.py \S+ bad-files &&")
    keep = [re.sub(r"^(  \w+ +\w+ +).*?: not graded: ", r"\1... ", l) for l in body if re.match(r"^  (FAIL|MISSING)", l)]
    err = [cut(l, 100) for l in body if l.startswith("(stderr)")]
    return block(["$ " + cmd] + [cut(l, 90) for l in keep[:2]] + ["..."] + err[:1] + ["..."] + [f"(exit {rc})"])


@part("s07-json")
def s07_json():
    """The results file of the Break 2 student: the head and two tests."""
    cmds = [r for r in runs() if r[0].startswith("cat ") and r[0].endswith("results.json")]
    if not cmds:
        raise DataError(f"plots/gallery/{GRADE}: no 'cat .../results.json'")
    cmd, body, rc = cmds[0]
    keep = [cut(l, 100) for l in body if not re.match(r'^\s+\{"name": "(negative|causal|large|huge|alibi|late_max|very_neg|ragged)"', l)]
    return block(["$ " + cmd] + keep)


@part("s07-max-score")
def s07_max_score():
    cmd, body, rc = [r for r in runs() if r[0].startswith("cat ")][0]
    return grab_in(body, r'"max_score": (\d+),$')


def grab_in(body, pattern):
    for l in body:
        m = re.search(pattern, l)
        if m:
            return m.group(1)
    raise DataError(f"plots/gallery/{GRADE}: no line matches {pattern!r}")
