#!/bin/sh
# record.sh FILE -- COMMAND...: run COMMAND and keep what it wrote as a recorded run, the data a lesson quotes.
#
#   sh plots/record.sh plots/gallery/step04_cpu.txt -- ./step04                      its output (stdout and stderr)
#   sh plots/record.sh plots/gallery/bench_h200_fp16.csv -- ./step05 --bench --dtype fp16 --csv @CSV@
#
# FILE ending in .csv: COMMAND writes a CSV where @CSV@ stands, FILE keeps that CSV (COMMAND's output is shown only
# when it fails); any other FILE keeps COMMAND's output. FILE opens with the run's identity, one '# key: value' line each:
# the machine (the GPU nvidia-smi names, else the CPU), the date, the commit (RUN_COMMIT, or git's HEAD with
# "-dirty" when the tree has changes), the command and its exit code. plots/lesson.py writes the READMEs' figures
# from these files, and the plot scripts read them (csvio skips the '#' lines).
set -u
file=${1:?usage: sh plots/record.sh FILE -- COMMAND...}; shift
[ "${1:-}" = "--" ] && shift
[ $# -gt 0 ] || { echo "usage: sh plots/record.sh FILE -- COMMAND..." >&2; exit 2; }
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1 | sed 's/, / (driver /;s/$/)/')
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
[ -n "$gpu" ] && machine="$gpu" || machine="${cpu:-a CPU}, $(nproc 2>/dev/null || echo '?') cores, no GPU"
commit=${RUN_COMMIT:-$(git rev-parse --short=10 HEAD 2>/dev/null || echo unknown)}
[ -z "${RUN_COMMIT:-}" ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] && commit="$commit-dirty"
tmp=$(mktemp) || exit 1
case $file in
*.csv) cmd=""; for a in "$@"; do [ "$a" = @CSV@ ] && a=$tmp.csv; cmd="$cmd $a"; done
       set -f; eval "set -- $cmd"; set +f ;;
esac
shown=$(printf '%s ' "$@" | sed "s|$tmp.csv|FILE.csv|g;s/ $//")
"$@" >"$tmp" 2>&1; rc=$?
{
    echo "# machine: $machine"
    echo "# date: $(date -u +%Y-%m-%d)"
    echo "# commit: $commit"
    echo "# command: $shown"
    echo "# exit: $rc"
    case $file in *.csv) cat "$tmp.csv" 2>/dev/null ;; *) cat "$tmp" ;; esac
} >"$file"
case $file in *.csv) [ $rc -eq 0 ] || tail -n 20 "$tmp" >&2 ;; esac
rm -f "$tmp" "$tmp.csv"
echo "record: $file ($machine, exit $rc)"
exit $rc
