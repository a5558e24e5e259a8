#!/usr/bin/env python3
"""lesson.py: the figures the lessons quote, written from the recorded runs they come from.

Every table, output block and number a README quotes from a run is generated here from a data file in
plots/gallery/ (a step's --csv or output, written by plots/record.sh with the run's machine, date, commit and
command on its first lines). In the markdown a generated part sits between markers:

    <!-- lesson:NAME -->                      a block (a table, an output excerpt), whole lines
    ...
    <!-- /lesson:NAME -->
    text <!--v:NAME-->825.1<!--/v--> text     a value inside a sentence

    python3 plots/lesson.py --check [FILE.md ...]   PASS or FAIL per generated part (make check runs this); exit 1 on a FAIL
    python3 plots/lesson.py --write [FILE.md ...]   rewrite the generated parts from the data (of the files named, or all)
    python3 plots/lesson.py --list                  the parts and the files they are in

A README whose generated part differs from what the data gives FAILs: a figure is typed once, by a run.
Only the standard library: it runs where matplotlib is not installed.
"""
import csv
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
GALLERY = os.path.join(ROOT, "plots", "gallery")
LESSONS = ["README.md", "01_naive/README.md", "02_memprobe/README.md", "03_tiled_cpu/README.md",
           "04_online_softmax/README.md", "05_cuda_fused/README.md", "06_causal/README.md", "07_break_it/README.md",
           "07_break_it/EXERCISES.md", "05_cuda_fused/RESULTS.md", "06_causal/RESULTS.md"]


class DataError(Exception):
    pass


# --- reading the recorded runs --------------------------------------------------------------------------------

def meta_and_lines(name):
    """The '# key: value' identity of a data file and the lines after it."""
    path = os.path.join(GALLERY, name)
    try:
        with open(path, newline="") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise DataError(f"cannot read plots/gallery/{name}: {e.strerror}")
    meta, i = {}, 0
    while i < len(lines) and lines[i].startswith("# "):
        k, _, v = lines[i][2:].partition(": ")
        meta[k.strip()] = v.strip()
        i += 1
    return meta, lines[i:]


def rows(name, **where):
    """The CSV rows of a data file (dicts), those whose columns equal `where`'s values (as strings)."""
    _, lines = meta_and_lines(name)
    out = []
    for r in csv.DictReader(lines):
        if all(str(r.get(k)) == str(v) for k, v in where.items()):
            out.append(r)
    return out


def one(name, col, **where):
    """The value of column col in the one row of name that matches `where`."""
    rs = rows(name, **where)
    if len(rs) != 1:
        raise DataError(f"plots/gallery/{name}: {len(rs)} rows match {where}, expected one")
    return rs[0][col]


def grab(name, pattern, group=1):
    """Group `group` of the first line of a recorded output that matches `pattern`."""
    for line in meta_and_lines(name)[1]:
        m = re.search(pattern, line)
        if m:
            return m.group(group)
    raise DataError(f"plots/gallery/{name}: no line matches {pattern!r}")


def meta(name, key):
    """A run's '# key: value' line (machine, date, commit, command, exit): its value; a DataError if it has none."""
    v = meta_and_lines(name)[0].get(key)
    if not v:
        raise DataError(f"plots/gallery/{name}: no '# {key}:' line (write it with plots/record.sh)")
    return v


def machine(name):
    """The machine a run names (its '# machine:' line, a GPU with its driver)."""
    return meta(name, "machine")


def command(name):
    """The command a run names."""
    return meta(name, "command")


def gpu_name(name):
    """The machine a run names, without the GPU's driver."""
    return machine(name).split(" (driver")[0]


def source(name, what="the run"):
    """One line naming where a figure comes from: the GPU or CPU and the command (the date, commit and driver are in
    the file)."""
    return f"{what}: {gpu_name(name)}, `{command(name)}` ([{name}](%GALLERY%/{name}))"


def excerpt(name, pick, caption=True):
    """An output block of the lines of a recorded output that the patterns in pick select, in the file's order.
    pick: regular expressions (a line is kept when one matches) and ("range", first, last) tuples (every line from
    the first match of `first` to the next match of `last`, both kept). '...' lines mark what is left out."""
    _, lines = meta_and_lines(name)
    keep = [False] * len(lines)
    for p in pick:
        if isinstance(p, tuple):
            _, a, b = p
            start = next((i for i, l in enumerate(lines) if re.search(a, l)), None)
            if start is None:
                raise DataError(f"plots/gallery/{name}: no line matches {a!r}")
            # the end is searched from the line after the start when the two patterns are the same ("---" to "---")
            end = next((i for i in range(start + (a == b), len(lines)) if re.search(b, lines[i])), None)
            if end is None:
                raise DataError(f"plots/gallery/{name}: no line matches {b!r} after {a!r}")
            for i in range(start, end + 1):
                keep[i] = True
        else:
            hits = [i for i, l in enumerate(lines) if re.search(p, l)]
            if not hits:
                raise DataError(f"plots/gallery/{name}: no line matches {p!r}")
            for i in hits:
                keep[i] = True
    out, gap = [], False
    for i, l in enumerate(lines):
        if keep[i]:
            if gap and out:
                out.append("...")
            out.append(l.rstrip())
            gap = False
        else:
            gap = True
    text = "```\n" + "\n".join(out) + "\n```"
    if caption:
        text += "\n\n<sub>" + source(name) + "</sub>"
    return text


def fmt(x, nd=1):
    return f"{float(x):.{nd}f}"


def table(header, body, align=None):
    align = align or ["---"] + ["---:"] * (len(header) - 1)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in body]
    return "\n".join(lines)


# --- the generated parts: NAME -> a function returning the markdown ---------------------------------------------
# One function per figure, registered by name with @part; %GALLERY% in what it returns becomes the path from the
# README's folder to plots/gallery.

PARTS = {}


def part(name):
    def reg(f):
        PARTS[name] = f
        return f
    return reg


def load_parts():
    """The parts live in plots/lesson_parts/, a file per lesson (root.py, step01.py, ...), each `from lesson import
    part, ...`: loaded here, in name order."""
    import importlib.util
    sys.modules.setdefault("lesson", sys.modules[__name__])
    folder = os.path.join(ROOT, "plots", "lesson_parts")
    for f in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if f.endswith(".py") and not f.startswith("_"):
            spec = importlib.util.spec_from_file_location("lesson_parts_" + f[:-3], os.path.join(folder, f))
            spec.loader.exec_module(importlib.util.module_from_spec(spec))


# --- markers ----------------------------------------------------------------------------------------------------

BLOCK = re.compile(r"(<!-- lesson:([a-z0-9_\-]+) -->\n)(.*?)(<!-- /lesson:\2 -->)", re.S)
VALUE = re.compile(r"(<!--v:([a-z0-9_\-]+)-->)(.*?)(<!--/v-->)", re.S)


def render(name, md_path):
    if name not in PARTS:
        raise DataError(f"no generated part named '{name}' in plots/lesson_parts/")
    text = str(PARTS[name]())
    here = os.path.dirname(os.path.join(ROOT, md_path))
    # the link from the README to the file, also for a run kept outside the gallery (05_cuda_fused/*/runs/)
    return re.sub(r"%GALLERY%/([^)\s`]+)",
                  lambda m: os.path.relpath(os.path.normpath(os.path.join(GALLERY, m.group(1))), here), text)


def process(md_path, write):
    """(results, new_text): one (ok, name, detail) per generated part of the file."""
    path = os.path.join(ROOT, md_path)
    with open(path) as f:
        text = f.read()
    results = []

    def block(m):
        name = m.group(2)
        try:
            want = render(name, md_path).rstrip("\n") + "\n"
        except DataError as e:
            results.append((False, name, str(e)))
            return m.group(0)
        ok = m.group(3) == want
        results.append((ok, name, "the same as its data gives" if ok else first_difference(m.group(3), want)))
        return m.group(1) + want + m.group(4)

    def value(m):
        name = m.group(2)
        try:
            want = render(name, md_path)
        except DataError as e:
            results.append((False, name, str(e)))
            return m.group(0)
        ok = m.group(3) == want
        results.append((ok, name, "the same as its data gives" if ok else f"the README says '{m.group(3)}', the data gives '{want}'"))
        return m.group(1) + want + m.group(4)

    new = BLOCK.sub(block, text)
    new = VALUE.sub(value, new)
    if write and new != text:
        with open(path, "w") as f:
            f.write(new)
    return results


def first_difference(have, want):
    h, w = have.splitlines(), want.splitlines()
    for i in range(max(len(h), len(w))):
        a = h[i] if i < len(h) else "(nothing)"
        b = w[i] if i < len(w) else "(nothing)"
        if a != b:
            return f"line {i + 1} of the part says '{a[:120]}', the data gives '{b[:120]}'"
    return "differs"


def main(argv):
    load_parts()
    mode = argv[1] if len(argv) > 1 else "--check"
    if mode not in ("--check", "--write", "--list"):
        print("usage: python3 plots/lesson.py [--check | --write | --list]", file=sys.stderr)
        return 2
    only = [os.path.relpath(os.path.abspath(f), ROOT) for f in argv[2:]]
    for f in only:
        if f not in LESSONS:
            print(f"lesson.py: {f} is not one of the lessons ({', '.join(LESSONS)})", file=sys.stderr)
            return 2
    failed = 0
    n = 0
    for md in only or LESSONS:
        if not os.path.exists(os.path.join(ROOT, md)):
            continue
        for ok, name, detail in process(md, mode == "--write"):
            n += 1
            if mode == "--list":
                print(f"{md}: {name}")
                continue
            if mode == "--write" and ok is False and not detail.startswith(("cannot", "no ", "plots/")):
                ok, detail = True, "rewritten from its data"
            print(f"{'PASS' if ok else 'FAIL'} lesson/{md}:{name}: {detail}")
            failed += not ok
    if mode != "--list":
        print(f"lesson: {n} generated parts, {failed} differ from their data")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
