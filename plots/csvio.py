"""csvio.py: the one thing every plot script shares: read a step's --csv file
(header row, then rows), or exit with one clear line when it is missing or
malformed. Also sets matplotlib's headless backend."""
import csv
import sys

import matplotlib

matplotlib.use("Agg")


def read(path, columns):
    """Rows of path as dicts; every column in `columns` must be in the header."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        sys.exit(f"{sys.argv[0]}: cannot read {path}: {e.strerror} (run the step with --csv first: make plots)")
    if not rows:
        sys.exit(f"{sys.argv[0]}: {path} has no rows")
    missing = [c for c in columns if c not in rows[0]]
    if missing:
        sys.exit(f"{sys.argv[0]}: {path} lacks column(s) {', '.join(missing)}: not the CSV this script reads")
    return rows


def num(row, col, path):
    try:
        return float(row[col])
    except (TypeError, ValueError):
        sys.exit(f"{sys.argv[0]}: {path}: column {col} has '{row[col]}', not a number")


def args(n, usage):
    if len(sys.argv) != n + 1:
        sys.exit(f"usage: {sys.argv[0]} {usage}")
    return sys.argv[1:]
