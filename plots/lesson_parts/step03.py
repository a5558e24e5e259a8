"""The generated parts of 03_tiled_cpu/README.md (names s03-...): every figure it quotes, read from the recorded runs
in plots/gallery/ (python3 plots/lesson.py --check / --write).

  step03_cpu.txt         ./step03            B=2 H=4 N=256 D=32, BR=BC=32: version B and the two-pass version
  step03_cpu_bc256.txt   ./step03 --bc 256   one K/V tile covers N: version B is right
Every part reads whatever its file holds: a rerun rewrites the figures, never the prose's shape."""

from lesson import excerpt, grab, part

RUN, ONE = "step03_cpu.txt", "step03_cpu_bc256.txt"


@part("s03-run")
def run():
    return excerpt(RUN, [r"^step03:", r"^score tile:", r"^version B", r"^two-pass"])


@part("s03-one-tile")
def one_tile():
    return excerpt(ONE, [r"^step03:", r"^version B"])


@part("s03-tile-bytes")
def tile_bytes():
    return grab(RUN, r"^score tile: \[\d+, \d+\] = ([\d.]+ [KMG]?B)")


@part("s03-s-bytes")
def s_bytes():
    return grab(RUN, r"per head = ([\d.]+ [KMG]?B)")


@part("s03-tiles")
def tiles():
    return grab(RUN, r"\(\d+ x (\d+) tiles per head\)")  # K/V tiles per row (the second number)


@part("s03-b-maxabs")
def b_maxabs():
    return grab(RUN, r"^version B.*?max abs ([\d.e+-]+)")


@part("s03-b-maxrel")
def b_maxrel():
    return grab(RUN, r"^version B.*?max rel ([\d.e+-]+)")


@part("s03-two-maxabs")
def two_maxabs():
    return grab(RUN, r"^two-pass.*?max abs ([\d.e+-]+)")


@part("s03-two-maxrel")
def two_maxrel():
    return grab(RUN, r"^two-pass.*?max rel ([\d.e+-]+)")


@part("s03-k-once")
def k_once():
    return grab(RUN, r"^version B.*K read: ([\d.]+ [KMG]?B)")


@part("s03-k-twice")
def k_twice():
    return grab(RUN, r"^two-pass.*K read: ([\d.]+ [KMG]?B)")


@part("s03-one-maxabs")
def one_maxabs():
    return grab(ONE, r"^version B.*?max abs ([\d.e+-]+)")
